// SigV4 against AWS's published S3 examples ("Authenticating Requests:
// Using the Authorization Header", examplebucket, 20130524), and the
// configuration parsing and resolution order (src/io/s3/config.h). The
// requests themselves are tested against a real server in
// tests/integration/test_s3.py.
#include <gtest/gtest.h>

#include <cstdlib>

#include "src/io/s3/config.h"
#include "src/io/s3/sigv4.h"

namespace feedline::io::s3 {
namespace {

constexpr char kEmptySha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const SigningKeys kKeys{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                        "us-east-1", "s3"};
constexpr char kDate[] = "20130524T000000Z";

TEST(SigV4Test, GetObjectWithRangeMatchesTheAwsExample) {
  SigningRequest r{"GET",
                   "/test.txt",
                   {},
                   {{"Host", "examplebucket.s3.amazonaws.com"},
                    {"Range", "bytes=0-9"},
                    {"x-amz-content-sha256", kEmptySha},
                    {"x-amz-date", kDate}},
                   kEmptySha};
  EXPECT_EQ(HexSha256(CanonicalRequest(r)),
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(Signature(r, kKeys, kDate),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(AuthorizationHeader(r, kKeys, kDate),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, PutObjectMatchesTheAwsExample) {
  const std::string body = "Welcome to Amazon S3.";
  const std::string sha = HexSha256(body);
  EXPECT_EQ(sha, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  SigningRequest r{"PUT",
                   "/" + UriEncode("test$file.text", true),
                   {},
                   {{"Host", "examplebucket.s3.amazonaws.com"},
                    {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                    {"x-amz-date", kDate},
                    {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                    {"x-amz-content-sha256", sha}},
                   sha};
  EXPECT_EQ(r.path, "/test%24file.text");
  EXPECT_EQ(Signature(r, kKeys, kDate),
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4Test, BucketQueriesMatchTheAwsExamples) {
  SigningRequest lifecycle{"GET",
                           "/",
                           {{"lifecycle", ""}},
                           {{"Host", "examplebucket.s3.amazonaws.com"},
                            {"x-amz-date", kDate},
                            {"x-amz-content-sha256", kEmptySha}},
                           kEmptySha};
  EXPECT_EQ(Signature(lifecycle, kKeys, kDate),
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
  // Query parameters are signed sorted whatever order they were given in.
  SigningRequest list{"GET",
                      "/",
                      {{"prefix", "J"}, {"max-keys", "2"}},
                      {{"Host", "examplebucket.s3.amazonaws.com"},
                       {"x-amz-date", kDate},
                       {"x-amz-content-sha256", kEmptySha}},
                      kEmptySha};
  EXPECT_EQ(CanonicalQuery(list.query), "max-keys=2&prefix=J");
  EXPECT_EQ(Signature(list, kKeys, kDate),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4Test, KeysAreEncodedOnceWithSlashesKept) {
  EXPECT_EQ(UriEncode("a b/c+d/é~x_y-z.jpg", true), "a%20b/c%2Bd/%C3%A9~x_y-z.jpg");
  EXPECT_EQ(UriEncode("a/b=c", false), "a%2Fb%3Dc");
  EXPECT_EQ(AmzDate(1369353600), kDate);
}

TEST(S3ConfigTest, IniFilesKeepProfilesAndNestedS3Settings) {
  const IniSections ini = ParseIni(
      "[default]\nregion = eu-west-1\n# comment\n[profile dev]\nregion=us-west-2\n"
      "s3 =\n  addressing_style = path\n  endpoint_url = http://127.0.0.1:9000\n"
      "aws_access_key_id = AKID\n");
  EXPECT_EQ(ini.at("default").at("region"), "eu-west-1");
  EXPECT_EQ(ini.at("profile dev").at("region"), "us-west-2");
  EXPECT_EQ(ini.at("profile dev").at("s3.addressing_style"), "path");
  EXPECT_EQ(ini.at("profile dev").at("s3.endpoint_url"), "http://127.0.0.1:9000");
  EXPECT_EQ(ini.at("profile dev").at("aws_access_key_id"), "AKID");
}

TEST(S3ConfigTest, IsoTimesParseAndGarbageIsRefused) {
  EXPECT_EQ(ParseIsoTime("2013-05-24T00:00:00Z"), 1369353600);
  EXPECT_EQ(ParseIsoTime("yesterday"), -1);
}

TEST(S3ConfigTest, OptionsWinOverTheEnvironmentAndCustomEndpointsArePathStyle) {
  ::setenv("AWS_REGION", "ap-south-1", 1);
  ::setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/base/", 1);
  ::setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
  S3Options o;
  Result<std::shared_ptr<const Config>> c = ResolveConfig(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->region, "ap-south-1");
  EXPECT_EQ((*c)->scheme, "http");
  EXPECT_EQ((*c)->host, "127.0.0.1:9000");
  EXPECT_EQ((*c)->base_path, "/base");
  EXPECT_TRUE((*c)->PathStyle("bucket"));
  o.region = "us-east-2";
  o.endpoint_url = "";
  ::unsetenv("AWS_ENDPOINT_URL");
  c = ResolveConfig(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->region, "us-east-2");
  EXPECT_EQ((*c)->host, "s3.us-east-2.amazonaws.com");
  EXPECT_FALSE((*c)->PathStyle("my-bucket"));
  EXPECT_TRUE((*c)->PathStyle("my.dotted.bucket"));  // not a DNS label: TLS would not match
  o.endpoint_url = "ftp://x";
  EXPECT_EQ(ResolveConfig(o).status().code(), StatusCode::kInvalidArgument);
  ::unsetenv("AWS_REGION");
  ::unsetenv("AWS_CONFIG_FILE");
}

TEST(S3ConfigTest, MissingCredentialsNameEveryPlaceLookedAt) {
  for (const char* v :
       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"})
    ::unsetenv(v);
  ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
  ::setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
  ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  Result<std::shared_ptr<const Config>> c = ResolveConfig(S3Options{});
  ASSERT_TRUE(c.ok());
  Result<Credentials> creds = (*c)->credentials->Get();
  ASSERT_FALSE(creds.ok());
  EXPECT_EQ(creds.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(creds.status().message().find("/nonexistent/credentials [default]"), std::string::npos)
      << creds.status();
  EXPECT_NE(creds.status().message().find("anonymous"), std::string::npos);
  ::setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "SECRET", 1);
  creds = (*c)->credentials->Get();
  ASSERT_TRUE(creds.ok()) << creds.status();
  EXPECT_EQ(creds->source, "environment");
  for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SHARED_CREDENTIALS_FILE",
                        "AWS_CONFIG_FILE", "AWS_EC2_METADATA_DISABLED"})
    ::unsetenv(v);
}

}  // namespace
}  // namespace feedline::io::s3
