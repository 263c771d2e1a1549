# DLOCK_SANITIZE="address;undefined" or "thread": instrument every target of this build.
if(DLOCK_SANITIZE)
  list(JOIN DLOCK_SANITIZE "," _dlock_sanitizers)
  message(STATUS "dlock: building with -fsanitize=${_dlock_sanitizers}")
  add_compile_options(-fsanitize=${_dlock_sanitizers} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_dlock_sanitizers})
  if("thread" IN_LIST DLOCK_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC warns for every std::atomic_thread_fence reached from Asio; TSan handles the mutexes.
    add_compile_options(-Wno-tsan)
  endif()
endif()
