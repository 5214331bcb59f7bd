#ifndef PARLEY_CCURL_SHIM_H
#define PARLEY_CCURL_SHIM_H
#include <curl/curl.h>

/// curl_easy_setopt and curl_easy_getinfo are variadic: one typed wrapper per argument kind.
static inline CURLcode parley_curl_setopt_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode parley_curl_setopt_string(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode parley_curl_setopt_pointer(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}
typedef size_t (*parley_curl_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode parley_curl_setopt_write(CURL *curl, parley_curl_callback callback, void *context) {
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, callback);
    return curl_easy_setopt(curl, CURLOPT_WRITEDATA, context);
}
static inline CURLcode parley_curl_setopt_header(CURL *curl, parley_curl_callback callback, void *context) {
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, callback);
    return curl_easy_setopt(curl, CURLOPT_HEADERDATA, context);
}
static inline long parley_curl_response_code(CURL *curl) {
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    return code;
}
#endif
