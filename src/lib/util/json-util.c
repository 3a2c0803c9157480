/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "json-util.h"

int bv_json_add(struct json_object *o, const char *key, struct json_object *v)
{
        if (!v)
                return -ENOMEM;
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}
