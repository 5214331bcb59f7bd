#ifndef PARLEY_CSQLITE_SHIM_H
#define PARLEY_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a macro casting -1 to a function pointer; Swift cannot import it. */
static inline int parley_sqlite3_bind_text(sqlite3_stmt *statement, int index, const char *text, int length) {
    return sqlite3_bind_text(statement, index, text, length, SQLITE_TRANSIENT);
}
#endif
