/* Force-included first in native builds (fuzz/c/build.sh). The static_asserts of the sources pin the wasm32 layouts the
 * JS host mirrors (pointer-size offsets); on a 64-bit host they do not hold and do not matter, so they are disabled here
 * (self-referential macro: the inner _Static_assert is the keyword). The wasm build checks all of them. */
#define _Static_assert(cond, msg) _Static_assert(sizeof(void *) == 8 || (cond), msg)
