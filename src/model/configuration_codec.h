// gangkeeper model: reading and writing Kueue's Configuration document
// (configuration.h). Used by decode.cc and encode.cc only.
#pragma once

#include <string>

#include "gangkeeper/model/configuration.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/objects.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::model {

// Whether a document is a Kueue Configuration (config.kueue.x-k8s.io/*).
bool IsConfigurationDocument(const std::string& api_version, const std::string& kind);

// Reads the enforced parts into policies->configuration; every other part
// is a warning naming what is not enforced; a second Configuration, a bad
// strategy or a transformation that repeats an input is an error (and
// nothing of the document is kept).
void DecodeConfigurationDocument(const nlohmann::json& doc, const std::string& api_version, const SourceRef& source,
                                 PolicySet* policies, Diagnostics* d);

// The canonical form of what is enforced (the policy digest and the
// durable state carry it).
nlohmann::json EncodeConfiguration(const KueueConfiguration& config);

}  // namespace gangkeeper::model
