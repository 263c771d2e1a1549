# dlock_embed_lua(OUTPUT <header> NAMESPACE <ns> FILES <a.lua>...)
#
# Generates, at build time, a header with one `inline constexpr std::string_view <stem>` per Lua
# file, so scripts stay readable .lua files in the tree and are re-embedded whenever they change.
function(dlock_embed_lua)
  cmake_parse_arguments(ARG "" "OUTPUT;NAMESPACE" "FILES" ${ARGN})
  set(_abs_files)
  foreach(_f IN LISTS ARG_FILES)
    list(APPEND _abs_files ${CMAKE_CURRENT_SOURCE_DIR}/${_f})
  endforeach()
  string(REPLACE ";" "|" _joined "${_abs_files}")
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${ARG_OUTPUT} -DNAMESPACE=${ARG_NAMESPACE}
            "-DFILES=${_joined}" -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_lua.cmake
    DEPENDS ${_abs_files} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_lua.cmake
    COMMENT "Embedding Lua scripts into ${ARG_OUTPUT}"
    VERBATIM)
endfunction()
