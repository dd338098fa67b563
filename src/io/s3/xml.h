// A small DOM over expat for S3's XML answers (ListBucketResult, Error,
// InitiateMultipartUploadResult, CompleteMultipartUploadResult). Namespaces
// are dropped from names; text is the element's own character data.
//
// Thread safety: free functions and plain values.
#ifndef FEEDLINE_SRC_IO_S3_XML_H_
#define FEEDLINE_SRC_IO_S3_XML_H_

#include <memory>
#include <string>
#include <vector>

#include "feedline/status.h"

namespace feedline::io::s3 {

struct XmlNode {
  std::string name, text;
  std::vector<std::unique_ptr<XmlNode>> children;
  // The first child named `name`, or null.
  const XmlNode* Child(const std::string& name) const;
  // The text of the first child named `name`, or "".
  std::string ChildText(const std::string& name) const;
};

// DataLoss naming the parser's reason and line for malformed XML.
Result<std::unique_ptr<XmlNode>> ParseXml(const std::string& text);

// "<&>\"'" as entities, for the bodies we send.
std::string XmlEscape(const std::string& s);

}  // namespace feedline::io::s3

#endif  // FEEDLINE_SRC_IO_S3_XML_H_
