// Plain image folders in torchvision's ImageFolder layout, read as they are:
//   root/<class name>/<any path>/<file>.<torchvision image extension>
// The listing is torchvision's, exactly: `classes` equals
// ImageFolder(root).classes and `Path(i)`/`labels[i]` equal
// ImageFolder(root).samples[i], in the same order (see Open).
//
// Names are bytes: a file or class name need not be UTF-8, and nothing here
// decodes it. Sorting compares names as Python compares os.fsdecode()'d str
// (code points, undecodable bytes as U+DC80..U+DCFF), so the order matches
// torchvision's even for names that are not UTF-8.
//
// An s3:// root is the same tree in a bucket (docs/object_stores.md): its
// keys under root + "/" are the paths, listed once with ListObjectsV2, and
// the classes, files and order are those of the same tree on local disk.
//
// Thread safety: an ImageFolder is immutable after Open; the read op is a
// SampleOp (safe for concurrent use).
#ifndef FEEDLINE_IMAGE_FOLDER_H_
#define FEEDLINE_IMAGE_FOLDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "feedline/export.h"
#include "feedline/file.h"
#include "feedline/object_store.h"
#include "feedline/sample.h"
#include "feedline/status.h"

namespace feedline {

struct FEEDLINE_EXPORT ImageFolderOptions {
  // Skips directories whose name starts with '.' (`.ipynb_checkpoints`,
  // `.git`), both as classes at the root and inside class folders.
  // torchvision has no such option: off by default for exact parity.
  bool skip_hidden_dirs = false;
  // For an s3:// root: endpoint, credentials, retries (file.h).
  HttpOptions http;
};

// torchvision.datasets.folder.IMG_EXTENSIONS, compared case-insensitively
// against the end of the file name (".JPG" counts; so does a file named
// ".png").
FEEDLINE_EXPORT bool HasImageExtension(std::string_view file_name);

struct FEEDLINE_EXPORT ImageFolder {
  std::string root;
  std::vector<std::string> classes;  // sorted; index = label
  std::vector<std::string> files;    // relative to root ("<class>/<sub>/<name>")
  std::vector<int64_t> labels;       // per file
  // Listed from an object store: each file's size and ETag as the listing
  // gave them (reads are If-Match that ETag). Empty for a local folder.
  std::vector<uint64_t> sizes;
  std::vector<std::string> etags;

  // The path torchvision lists for sample i: os.path.join(root, files[i]).
  std::string Path(size_t i) const;

  // Lists the tree as torchvision's find_classes + make_dataset do:
  //  - classes: the entries of root that are directories, following
  //    symlinks, sorted;
  //  - samples: per class in order, every directory of
  //    os.walk(class_dir, followlinks=True) sorted by its path, then its
  //    non-directory entries sorted by name, kept when HasImageExtension.
  //    A symlink to a file is listed under its own name; a symlink to a
  //    directory is walked. An entry whose target cannot be stat'ed (a
  //    dangling link) counts as a file, as in os.walk: with an image name
  //    it is listed, and reading it is a sample error naming its path.
  //  - a symlinked directory that leads back to one of its own ancestors
  //    (same device and inode: a loop) is not entered; its files are
  //    listed once, under the ancestor. Python's os.walk would instead
  //    descend until the kernel's ELOOP (listing each file ~40 times), so
  //    this is the one documented difference from torchvision.
  // Cost: per directory one open, one fstat (its identity, for the loop
  // check) and getdents64 until the end; no call per file: an entry is
  // stat'ed only when it is a symlink or its type is unknown (DT_LNK,
  // DT_UNKNOWN). File sizes are learnt when a file is read.
  // Errors (each names the directory or file):
  //  - NotFound: root missing or not a directory; root holds no class
  //    directory; a class directory holds no image file (torchvision's
  //    "Found no valid file for the classes ..."; the message points at
  //    skip_hidden_dirs when that class is a hidden directory);
  //  - InvalidArgument: a FIFO, socket or device with an image name (it
  //    would block or never end when read);
  //  - Unavailable: a directory that cannot be listed or an entry of root
  //    that cannot be stat'ed (permissions, I/O errors, ELOOP), where
  //    torchvision would raise or silently skip.
  //
  // An s3:// root is listed (every page) and handed to FromObjects.
  static Result<std::shared_ptr<const ImageFolder>> Open(const std::string& root,
                                                         const ImageFolderOptions& options = {});

  // The folder an object listing describes, as the same keys would be on
  // a local disk: root is "s3://bucket/prefix" (a trailing '/' or none),
  // and each key under prefix + "/" is a path. Objects directly under the
  // prefix are not samples (files at a local root are not either);
  // "directory marker" keys ending in '/' make a directory exist, so a
  // class holding nothing but a marker is the empty-class error above.
  // Skipped hidden directories are any path component starting with '.'.
  // A key with an empty, "." or ".." component has no local equivalent:
  // InvalidArgument naming it. No request is made.
  static Result<std::shared_ptr<const ImageFolder>> FromObjects(
      const std::string& root, const std::vector<ObjectInfo>& objects,
      const ImageFolderOptions& options = {});
};

// Reads sample i's file into the sample's bytes; sets label, file and key.
// A missing or unreadable file is a sample error naming the path and errno.
// An object-store folder's files are one GET each, If-Match the listed
// ETag, with `http`'s options, and fetched ahead of the workers in the
// loader's order within `read_ahead` (sized by the listing; ignored for
// local folders, which the page cache reads ahead).
// The pipelines over a folder are the recipes layer's (pipeline_builder.h).
FEEDLINE_EXPORT std::shared_ptr<const SampleOp> MakeReadFileOp(
    std::shared_ptr<const ImageFolder> folder, const HttpOptions& http = {},
    const ReadAheadOptions& read_ahead = {});

}  // namespace feedline

#endif  // FEEDLINE_IMAGE_FOLDER_H_
