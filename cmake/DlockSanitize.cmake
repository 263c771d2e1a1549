# DLOCK_SANITIZE="address;undefined" or "thread": instrument every target of this build.
if(DLOCK_SANITIZE)
  list(JOIN DLOCK_SANITIZE "," _dlock_sanitizers)
  message(STATUS "dlock: building with -fsanitize=${_dlock_sanitizers}")
  add_compile_options(-fsanitize=${_dlock_sanitizers} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_dlock_sanitizers})
endif()
