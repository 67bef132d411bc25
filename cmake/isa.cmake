# Per-ISA compile flags: only files under x86/avx512/ or x86/avx2/ get wide-vector flags; the
# rest of the build stays baseline x86-64 so the binary runs anywhere and picks a path by CPUID.
set(DS_AVX2_FLAGS -mavx2 -mfma -mf16c)
set(DS_AVX512_FLAGS -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512bf16 -mavx512vnni -mfma -mf16c -mavx2)

function(ds_apply_isa_flags)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "/x86/avx512/")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${DS_AVX512_FLAGS}")
    elseif(src MATCHES "/x86/avx2/")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${DS_AVX2_FLAGS}")
    endif()
  endforeach()
endfunction()
