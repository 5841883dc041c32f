// gangkeeper CLI: `gangkeeper certs`.
#include <cstdio>

#include "absl/strings/str_join.h"
#include "src/cli/certs.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"

namespace gangkeeper::cli {

int RunCerts(const std::vector<std::string>& args) {
  CertOptions options;
  FlagSet flags("certs",
                "Makes a CA (reused when DIR already holds a valid one) and an ECDSA P-256 serving certificate\n"
                "for the webhook Service, then prints the base64 caBundle for the webhook configurations.");
  flags.Synopsis("gangkeeper certs [--out DIR] [--service NAME] [--namespace NS] [--validity DURATION] [--new-ca]");
  flags.Examples("  gangkeeper certs --out certs/ --service gangkeeper --namespace gangkeeper-system");
  flags.String("out", &options.out_dir, "directory for ca.crt, ca.key, tls.crt, tls.key");
  flags.String("service", &options.service, "Service name of the webhook");
  flags.String("n,namespace", &options.namespace_name, "namespace of the Service");
  flags.Duration("validity", &options.validity, "lifetime of the serving certificate");
  flags.Bool("new-ca", &options.new_ca, "make a new CA even if DIR has a valid one");
  if (std::optional<int> done = flags.ParseOrExit(args, nullptr)) return *done;
  absl::StatusOr<CertResult> result = GenerateCertificates(options);
  if (!result.ok()) {
    std::fprintf(stderr, "gangkeeper certs: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "%s CA %s; serving certificate %s (key %s) for %s\n",
               result->ca_created ? "made" : "reused", result->ca_file.c_str(), result->cert_file.c_str(),
               result->key_file.c_str(), absl::StrJoin(result->sans, ", ").c_str());
  std::printf("%s\n", result->ca_bundle_base64.c_str());
  return 0;
}

}  // namespace gangkeeper::cli
