#include "src/io/s3/xml.h"

#include <expat.h>

namespace feedline::io::s3 {
namespace {

struct Builder {
  std::unique_ptr<XmlNode> root;
  std::vector<XmlNode*> stack;
  size_t nodes = 0;
  bool too_big = false;
};

// A ListObjectsV2 page holds at most 1,000 keys of a few nodes each; far
// more than this is not an S3 answer.
constexpr size_t kMaxNodes = 1u << 20;

std::string LocalName(const char* name) {
  std::string n(name);
  const size_t sep = n.rfind('\x01');  // the namespace separator we asked expat for
  return sep == std::string::npos ? n : n.substr(sep + 1);
}

void XMLCALL Start(void* user, const XML_Char* name, const XML_Char** /*attrs*/) {
  auto* b = static_cast<Builder*>(user);
  if (++b->nodes > kMaxNodes) {
    b->too_big = true;
    return;
  }
  auto node = std::make_unique<XmlNode>();
  node->name = LocalName(name);
  XmlNode* raw = node.get();
  if (b->stack.empty()) {
    if (!b->root) b->root = std::move(node);
  } else {
    b->stack.back()->children.push_back(std::move(node));
  }
  b->stack.push_back(raw);
}

void XMLCALL End(void* user, const XML_Char* /*name*/) {
  auto* b = static_cast<Builder*>(user);
  if (!b->stack.empty() && !b->too_big) b->stack.pop_back();
}

void XMLCALL Text(void* user, const XML_Char* s, int len) {
  auto* b = static_cast<Builder*>(user);
  if (!b->stack.empty() && !b->too_big) b->stack.back()->text.append(s, static_cast<size_t>(len));
}

}  // namespace

const XmlNode* XmlNode::Child(const std::string& n) const {
  for (const auto& c : children) {
    if (c->name == n) return c.get();
  }
  return nullptr;
}

std::string XmlNode::ChildText(const std::string& n) const {
  const XmlNode* c = Child(n);
  return c != nullptr ? c->text : std::string();
}

Result<std::unique_ptr<XmlNode>> ParseXml(const std::string& text) {
  XML_Parser p = XML_ParserCreateNS(nullptr, '\x01');
  if (p == nullptr) return InternalError("XML_ParserCreateNS failed");
  Builder b;
  XML_SetUserData(p, &b);
  XML_SetElementHandler(p, Start, End);
  XML_SetCharacterDataHandler(p, Text);
  const XML_Status st = XML_Parse(p, text.data(), static_cast<int>(text.size()), XML_TRUE);
  std::string why;
  if (st != XML_STATUS_OK) {
    why = std::string(XML_ErrorString(XML_GetErrorCode(p))) + " at line " +
          std::to_string(XML_GetCurrentLineNumber(p));
  }
  XML_ParserFree(p);
  if (b.too_big)
    return DataLossError("XML answer with more than " + std::to_string(kMaxNodes) + " elements");
  if (!why.empty()) return DataLossError("malformed XML answer: " + why);
  if (!b.root) return DataLossError("empty XML answer");
  return std::move(b.root);
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace feedline::io::s3
