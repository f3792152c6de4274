// The checks of tls_files.h, with OpenSSL.
#include "service/base/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <memory>
#include <vector>

namespace gpulab::service {

namespace {

template <typename T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using BioPtr = std::unique_ptr<BIO, Free<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Free<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY, EVP_PKEY_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Free<X509_STORE, X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Free<X509_STORE_CTX, X509_STORE_CTX_free>>;

Error bad_tls(const std::string& msg, const std::string& hint) {
  return Error{Code::kInvalidArgument, "config: " + msg,
               hint + " (hosts are described in docs/engines.md#many-hosts)"};
}

// Every PEM certificate in the file; empty when it holds none (or cannot be read).
std::vector<X509Ptr> read_certs(const std::string& path) {
  std::vector<X509Ptr> out;
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) return out;
  while (X509* c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(c);
  ERR_clear_error();  // the read that ends the loop leaves "no start line"
  return out;
}

std::string time_text(const ASN1_TIME* t) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || ASN1_TIME_print(bio.get(), t) != 1) return "?";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

// "" when `c` is valid now, else why not.
std::string validity(const X509* c) {
  if (X509_cmp_current_time(X509_get0_notBefore(c)) > 0)
    return "is not valid before " + time_text(X509_get0_notBefore(c));
  if (X509_cmp_current_time(X509_get0_notAfter(c)) < 0)
    return "expired on " + time_text(X509_get0_notAfter(c));
  return {};
}

// "" when `cert` verifies against the certificates of `cas`, else OpenSSL's reason.
std::string verify_against(X509* cert, const std::vector<X509Ptr>& cas) {
  StorePtr store(X509_STORE_new());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!store || !ctx) return "out of memory";
  for (const auto& ca : cas) X509_STORE_add_cert(store.get(), ca.get());
  if (X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) != 1) return "cannot verify";
  if (X509_verify_cert(ctx.get()) == 1) return {};
  return X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
}

}  // namespace

Status check_host_tls_files(const HostTlsFiles& f, const std::string& at) {
  const auto cas = read_certs(f.ca);
  if (cas.empty())
    return bad_tls(at + ".tls_ca: " + f.ca + " holds no PEM certificate",
                   "give the CA certificate that signed the engine's certificate");
  for (const auto& ca : cas)
    if (auto why = validity(ca.get()); !why.empty())
      return bad_tls(at + ".tls_ca: a certificate in " + f.ca + " " + why,
                     "renew the CA and the certificates it signed");
  auto certs = read_certs(f.cert);
  if (certs.empty())
    return bad_tls(at + ".tls_cert: " + f.cert + " is not a PEM certificate",
                   "give the service's client certificate (Docker's cert.pem)");
  X509* cert = certs.front().get();
  if (auto why = validity(cert); !why.empty())
    return bad_tls(at + ".tls_cert: " + f.cert + " " + why,
                   "make a new client certificate, signed by the CA the engine trusts");
  KeyPtr key;
  if (BioPtr bio(BIO_new_file(f.key.c_str(), "r")); bio)
    key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key)
    return bad_tls(at + ".tls_key: " + f.key + " is not a PEM private key",
                   "give the unencrypted key of tls_cert (Docker's key.pem)");
  if (X509_check_private_key(cert, key.get()) != 1) {
    ERR_clear_error();
    return bad_tls(at + ".tls_key: " + f.key + " is not the key of tls_cert " + f.cert,
                   "give the key the client certificate was made with");
  }
  if (f.client_ca.empty()) return ok_status();
  const auto client_cas = read_certs(f.client_ca);
  if (client_cas.empty())
    return bad_tls(at + ".tls_client_ca: " + f.client_ca + " holds no PEM certificate",
                   "give the CA the engine trusts for clients (dockerd --tlscacert)");
  if (auto why = verify_against(cert, client_cas); !why.empty())
    return bad_tls(at + ".tls_cert: " + f.cert + " is not signed by tls_client_ca " + f.client_ca +
                       " (" + why + "): the engine would refuse it",
                   "make the client certificate with the CA the engine trusts (dockerd "
                   "--tlscacert)");
  return ok_status();
}

}  // namespace gpulab::service
