/* cachedir — paths under the cache directory (fs/lib/cachedir.h). */
#include <stdio.h>

#include "cachedir.h"

int cachedir_path(const char *cache, const char *name, char *buf, size_t size)
{
	return snprintf(buf, size, "%s/%s", cache, name);
}
