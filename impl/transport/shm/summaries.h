// What each live context found about shared memory, one line per context, for
// starling_config_string ("shm: on (ranks 0-3 on host vm)"). Any thread.
#pragma once

#include <string>

namespace starling::transport::shm {

// Adds a context's line (without "shm: "); returns its id.
int AddSummary(const std::string& line);
// Replaces it (a repair or grow made it stale).
void UpdateSummary(int id, const std::string& line);
// The context is gone. Unknown ids are ignored.
void DropSummary(int id);
// "shm: <line>\n" per live context, oldest first; "" when there is none.
std::string SummaryLines();

}  // namespace starling::transport::shm
