/* Compiled as strict C99 (-std=c99 -pedantic -Werror): the public header must be
 * plain C. Also checks, from C, the calls that need no MPI: version, status strings,
 * NULL handles, and (with --expect-bad-env NAME) that an invalid environment variable
 * makes context creation fail with a message naming it. */
#include <stdio.h>
#include <string.h>

#include <starling/starling.h>

static int failures = 0;
#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--expect-bad-env") == 0) {
    starling_context_t ctx = NULL;
    starling_status_t s = starling_context_create(NULL, &ctx);
    EXPECT(s == STARLING_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(starling_last_error(), argv[2]) != NULL);
    printf("create failed as expected: %s\n", starling_last_error());
    return failures == 0 ? 0 : 1;
  }
  int rank = -1;
  starling_context_options_t options = STARLING_CONTEXT_OPTIONS_INIT;
  DLDataType f32 = {kDLFloat, 32, 1}, c64 = {kDLComplex, 64, 1};
  int supported = -1;

  EXPECT(starling_get_version() == STARLING_VERSION_CODE);
  EXPECT(STARLING_VERSION(1, 2, 3) == 10203);
  EXPECT(strlen(starling_status_string(STARLING_ERR_MISMATCH)) > 10);
  EXPECT(strcmp(starling_status_string(12345), "unknown status code") == 0);
  EXPECT(starling_rank(NULL, &rank) == STARLING_ERR_INVALID_HANDLE);
  EXPECT(strstr(starling_last_error(), "NULL") != NULL);
  EXPECT(options.struct_size == sizeof(starling_context_options_t));
  EXPECT(starling_dtype_supported(f32, &supported) == STARLING_SUCCESS && supported == 1);
  EXPECT(starling_dtype_supported(c64, &supported) == STARLING_SUCCESS && supported == 0);
  EXPECT(starling_dtype_supported(f32, NULL) == STARLING_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(starling_config_string(), "STARLING_LOG_LEVEL") != NULL);
  if (failures == 0) printf("C99 header check passed\n");
  return failures == 0 ? 0 : 1;
}
