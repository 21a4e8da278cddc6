# op_table.cmake — the build test of the per-op tables (ir/lrc_ir.h's
# LRC_OPS): a copy of SOURCE with one entry taken out must not compile, and
# the compiler must name that entry, so that the test cannot pass through
# some other error; the same copy with nothing taken out must compile.
#   cmake -DCC=... -DFLAGS="-I..;-isystem;..." -DSOURCE=ir/ops.c -DOUT=dir
#         [-DDROP=ROW_slice | -DFIND=text -DREPLACE=text -DEXPECT=regex] -P op_table.cmake
# DROP takes out the definition `#define DROP ...` (with its continuation
# lines) and expects the compiler to name DROP; FIND/REPLACE edits the text
# and expects EXPECT in the compiler's message. Neither: the copy as it is.
get_filename_component(name ${SOURCE} NAME_WE)
get_filename_component(dir ${SOURCE} DIRECTORY)
file(READ ${SOURCE} text)
set(want "")
if(DEFINED DROP AND NOT DROP STREQUAL "")
  string(REGEX REPLACE "#define ${DROP}[ \t]([^\n]*\\\\\n)*[^\n]*\n" "" edited "${text}")
  set(want "${DROP}")
  set(what "without ${DROP}")
  set(tag ${DROP})
elseif(DEFINED FIND AND NOT FIND STREQUAL "")
  string(REPLACE "${FIND}" "${REPLACE}" edited "${text}")
  set(want "${EXPECT}")
  set(what "with \"${FIND}\" made \"${REPLACE}\"")
  string(MAKE_C_IDENTIFIER "${FIND}" tag)
else()
  set(edited "${text}")
  set(tag whole)
endif()
if(NOT want STREQUAL "" AND edited STREQUAL text)
  message(FATAL_ERROR "FAIL: ${SOURCE} has no ${DROP}${FIND} to take out: the test no longer tests anything")
endif()
# the copy lives in OUT, so its own folder is searched for its includes
set(copy ${OUT}/${name}_${tag}.c)
file(WRITE ${copy} "${edited}")
execute_process(COMMAND ${CC} -std=gnu11 -fsyntax-only -Wall -Wextra ${FLAGS} -I${dir} ${copy}
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(want STREQUAL "")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "FAIL: ${SOURCE} as it is does not compile:\n${err}")
  endif()
  message(STATUS "ok: ${SOURCE} with every entry compiles")
  return()
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "FAIL: ${SOURCE} ${what} compiles: a missing entry is not caught")
endif()
string(REGEX MATCH "[^\n]*error:[^\n]*${want}[^\n]*" named "${err}")
if(named STREQUAL "")
  message(FATAL_ERROR "FAIL: ${SOURCE} ${what} fails, but not with \"${want}\":\n${err}")
endif()
message(STATUS "ok: ${SOURCE} ${what} does not compile: ${named}")
