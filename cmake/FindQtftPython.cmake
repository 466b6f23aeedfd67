# Locates the Python interpreter of the qtft virtual environment. The venv lives outside
# the clone (~/.cache/qtft/venv-<hash of scripts/requirements.txt>) so that clones, CI and
# worktrees share one multi-gigabyte install; scripts/setup.sh creates it.
if(NOT QTFT_PYTHON)
  file(SHA256 "${PROJECT_SOURCE_DIR}/scripts/requirements.txt" _qtft_req_hash)
  string(SUBSTRING "${_qtft_req_hash}" 0 12 _qtft_req_hash)
  if(DEFINED ENV{QTFT_CACHE_DIR})
    set(_qtft_cache "$ENV{QTFT_CACHE_DIR}")
  else()
    set(_qtft_cache "$ENV{HOME}/.cache/qtft")
  endif()
  set(QTFT_PYTHON "${_qtft_cache}/venv-${_qtft_req_hash}/bin/python"
      CACHE FILEPATH "Python of the venv that holds the torch and pyarrow wheels")
endif()
if(NOT EXISTS "${QTFT_PYTHON}")
  message(FATAL_ERROR
    "qtft: no Python at ${QTFT_PYTHON}. Run scripts/setup.sh first (it creates the venv "
    "with the pinned torch and pyarrow wheels), or pass -DQTFT_PYTHON=/path/to/python.")
endif()

# Runs a one-line Python snippet in the venv and stores its stdout in OUT_VAR.
function(qtft_python_eval OUT_VAR CODE)
  execute_process(
    COMMAND "${QTFT_PYTHON}" -c "${CODE}"
    OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "qtft: '${QTFT_PYTHON} -c \"${CODE}\"' failed: ${_err}")
  endif()
  set(${OUT_VAR} "${_out}" PARENT_SCOPE)
endfunction()
