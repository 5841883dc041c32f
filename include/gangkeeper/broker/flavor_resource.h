// gangkeeper broker: the accounting key, one resource of one ResourceFlavor,
// and amounts keyed by it. Value types; thread-compatible.
#pragma once

#include <compare>
#include <map>
#include <string>

#include "gangkeeper/model/objects.h"
#include "gangkeeper/quantity/quantity.h"

namespace gangkeeper::broker {

struct FlavorResource {
  model::FlavorName flavor;
  model::ResourceName resource;

  friend bool operator==(const FlavorResource&, const FlavorResource&) = default;
  friend auto operator<=>(const FlavorResource&, const FlavorResource&) = default;
  // "flavor/resource", for messages.
  std::string ToString() const { return flavor + "/" + resource; }
};

using ResourceAmounts = std::map<FlavorResource, quantity::Quantity>;

}  // namespace gangkeeper::broker
