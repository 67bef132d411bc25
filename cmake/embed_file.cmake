# cmake -DIN=file -DOUT=file.cpp -DSYMBOL=name -P embed_file.cmake
# Writes a C++ file defining `const std::string_view ds::embedded::SYMBOL` with the bytes of IN (a
# byte array, so any content is safe), for pages and scripts built into the binary.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR n_bytes "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){32})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUT}.tmp"
"// Generated from ${IN} by cmake/embed_file.cmake; do not edit.\n#include <string_view>\n\nnamespace ds::embedded {\nnamespace {\nconst unsigned char kBytes[] = {\n${bytes}0};\n}  // namespace\nextern const std::string_view ${SYMBOL};\nconst std::string_view ${SYMBOL}(reinterpret_cast<const char*>(kBytes), ${n_bytes});\n}  // namespace ds::embedded\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
