/* loader.c — library(path, symbol): a UDF from a shared object, via dlopen/dlsym. */
#include "orch_udf_host.h"
#include "orch_error.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

int orch_udf_load_library(const char *path, const char *symbol, const struct orch_udf **out,
                          void **handle)
{
    *out = NULL;
    *handle = NULL;
    if (path == NULL || path[0] == '\0' || symbol == NULL || symbol[0] == '\0')
        return orch_error_set(-EINVAL, "library(): a path and a symbol are required");
    if (access(path, F_OK) < 0) {
        int e = errno;
        return orch_error_set(ORCH_ENOTFOUND, "library %s: %s", path, strerror(e));
    }
    dlerror();
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        const char *why = dlerror();
        return orch_error_set(ORCH_ENOTFOUND, "library %s cannot be loaded: %s", path,
                              why != NULL ? why : "unknown dlopen error");
    }
    dlerror();
    const struct orch_udf *udf = dlsym(dl, symbol);
    if (udf == NULL) {
        dlclose(dl);
        return orch_error_set(ORCH_ENOTFOUND, "library %s has no symbol '%s'", path, symbol);
    }
    if (udf->abi_version < ORCH_UDF_ABI_OLDEST || udf->abi_version > ORCH_UDF_ABI_VERSION) {
        unsigned v = udf->abi_version;
        dlclose(dl);
        return orch_error_set(-ENOEXEC,
                              "library %s: '%s' was built for UDF ABI version %u, but this "
                              "orch speaks versions %d to %d (rebuild it against this "
                              "orch_udf.h)",
                              path, symbol, v, ORCH_UDF_ABI_OLDEST, ORCH_UDF_ABI_VERSION);
    }
    if (udf->run == NULL) {
        dlclose(dl);
        return orch_error_set(-ENOEXEC, "library %s: '%s' has no run function", path, symbol);
    }
    *out = udf;
    *handle = dl;
    return 0;
}

void orch_udf_unload_library(void *handle)
{
    if (handle != NULL)
        dlclose(handle);
}
