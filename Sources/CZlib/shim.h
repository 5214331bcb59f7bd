#ifndef PARLEY_CZLIB_SHIM_H
#define PARLEY_CZLIB_SHIM_H
#include <zlib.h>
/// deflateInit2/inflateInit2 are macros; Swift cannot call them.
static inline int parley_deflateInit2(z_streamp s, int level, int windowBits, int memLevel) {
    return deflateInit2(s, level, Z_DEFLATED, windowBits, memLevel, Z_DEFAULT_STRATEGY);
}
static inline int parley_inflateInit2(z_streamp s, int windowBits) {
    return inflateInit2(s, windowBits);
}
#endif
