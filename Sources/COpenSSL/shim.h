#ifndef PARLEY_COPENSSL_SHIM_H
#define PARLEY_COPENSSL_SHIM_H
#include <openssl/sha.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/ec.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>

/// Macros Swift cannot call.
static inline int parley_ssl_ctx_min_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}
static inline int parley_ssl_set_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
/// EVP_PKEY_fromdata selections (macros of macros).
static inline int parley_evp_pkey_keypair(void) { return EVP_PKEY_KEYPAIR; }
static inline int parley_evp_pkey_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }
static inline int parley_evp_gcm_get_tag(void) { return EVP_CTRL_GCM_GET_TAG; }
static inline int parley_evp_gcm_set_ivlen(void) { return EVP_CTRL_GCM_SET_IVLEN; }
/// Parameter names as static C strings: OSSL_PARAM_BLD keeps the pointers it is given.
static inline const char *parley_param_group(void) { return OSSL_PKEY_PARAM_GROUP_NAME; }
static inline const char *parley_param_pub(void) { return OSSL_PKEY_PARAM_PUB_KEY; }
static inline const char *parley_param_priv(void) { return OSSL_PKEY_PARAM_PRIV_KEY; }
static inline const char *parley_curve_p256(void) { return "prime256v1"; }
#endif
