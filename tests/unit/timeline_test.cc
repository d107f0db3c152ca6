// The timeline file: missing directories of STARLING_TIMELINE's prefix are created
// (parents included), and one that cannot be created is a clear error naming it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "impl/common/error.h"
#include "impl/runtime/timeline.h"

namespace starling::runtime {
namespace {

namespace fs = std::filesystem;

fs::path TempDir() {
  std::string pattern = (fs::temp_directory_path() / "starling_timeline_XXXXXX").string();
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

// The files this process's timelines wrote for `rank` under `prefix`: <prefix><rank>.json,
// or <prefix><rank>.<n>.json when another test made the process's first timeline.
int FilesFor(const fs::path& directory, const std::string& stem) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(directory))
    if (entry.path().filename().string().rfind(stem, 0) == 0) ++count;
  return count;
}

TEST(Timeline, CreatesMissingDirectoriesOfThePrefix) {
  const fs::path root = TempDir();
  const fs::path nested = root / "runs" / "today";
  { Timeline timeline((nested / "rank_").string(), 3); }
  ASSERT_TRUE(fs::is_directory(nested));
  EXPECT_EQ(FilesFor(nested, "rank_3"), 1);
  // An existing directory, and a prefix that is only a directory (files 0.json, ...).
  { Timeline timeline((nested / "").string(), 0); }
  EXPECT_EQ(FilesFor(nested, "0"), 1);
  fs::remove_all(root);
}

TEST(Timeline, UncreatableDirectoryIsAClearError) {
  const fs::path root = TempDir();
  std::ofstream(root / "file") << "not a directory";
  const std::string prefix = (root / "file" / "sub" / "rank_").string();
  try {
    Timeline timeline(prefix, 0);
    ADD_FAILURE() << "a directory below a regular file was created";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    const std::string message = e.what();
    EXPECT_NE(message.find("cannot create the directory '" + (root / "file" / "sub").string() + "'"),
              std::string::npos) << message;
    EXPECT_NE(message.find("STARLING_TIMELINE"), std::string::npos) << message;
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace starling::runtime
