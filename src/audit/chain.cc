// gangkeeper audit: the hash chain and its anchors (see chain.h).
#include "src/audit/chain.h"

#include <openssl/evp.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/store/codec.h"
#include "gangkeeper/store/crc32c.h"

namespace gangkeeper::audit {
namespace {

constexpr char kAnchorMagic[8] = {'G', 'K', 'A', 'N', 'C', 'H', '\0', '1'};
constexpr size_t kSealSize = 32 + 1;
constexpr size_t kSealHmacSize = 32 + 32 + 1;
// HEAD is rewritten from scratch once it holds this many bytes.
constexpr uint64_t kHeadRewriteBytes = 1 << 20;

Hash HashAt(const char* p) {
  Hash h;
  std::memcpy(h.data(), p, h.size());
  return h;
}

void AppendHash(const Hash& h, std::string* out) { out->append(reinterpret_cast<const char*>(h.data()), h.size()); }

}  // namespace

std::string Hex(const Hash& h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * h.size(), '0');
  for (size_t i = 0; i < h.size(); ++i) {
    out[2 * i] = kDigits[h[i] >> 4];
    out[2 * i + 1] = kDigits[h[i] & 0xF];
  }
  return out;
}

bool SplitSealed(absl::string_view payload, Sealed* out) {
  *out = Sealed{};
  if (payload.empty()) return false;
  const auto tag = static_cast<uint8_t>(payload.back());
  if (tag == '}') {
    out->json = payload;
    return true;
  }
  const size_t size = tag == kSealChain ? kSealSize : tag == kSealChainHmac ? kSealHmacSize : 0;
  if (size == 0 || payload.size() < size + 2) return false;
  const char* seal = payload.data() + payload.size() - size;
  out->json = payload.substr(0, payload.size() - size);
  out->chained = true;
  out->chain = HashAt(seal);
  if (tag == kSealChainHmac) {
    out->has_hmac = true;
    out->hmac = HashAt(seal + 32);
  }
  return out->json.back() == '}';
}

absl::string_view EventJson(absl::string_view payload) {
  Sealed s;
  return SplitSealed(payload, &s) ? s.json : payload;
}

struct Hasher::Contexts {
  EVP_MD* md = nullptr;
  EVP_MD_CTX* work = nullptr;
  EVP_MD_CTX* inner = nullptr;  // the key's inner pad absorbed (RFC 2104)
  EVP_MD_CTX* outer = nullptr;  // the key's outer pad absorbed
};

Hasher::Hasher(std::string key) : c_(std::make_unique<Contexts>()) {
  c_->md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  c_->work = EVP_MD_CTX_new();
  GK_CHECK(c_->md != nullptr && c_->work != nullptr);
  if (key.empty()) return;
  keyed_ = true;
  // HMAC (RFC 2104) with the pads hashed once: a key longer than the
  // 64-byte block is hashed first.
  unsigned char block[64] = {0};
  if (key.size() > sizeof block) {
    unsigned int n = 0;
    GK_CHECK(EVP_Digest(key.data(), key.size(), block, &n, c_->md, nullptr) == 1);
  } else {
    std::memcpy(block, key.data(), key.size());
  }
  unsigned char pad[64];
  c_->inner = EVP_MD_CTX_new();
  c_->outer = EVP_MD_CTX_new();
  GK_CHECK(c_->inner != nullptr && c_->outer != nullptr);
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = block[i] ^ 0x36;
  GK_CHECK(EVP_DigestInit_ex(c_->inner, c_->md, nullptr) == 1 && EVP_DigestUpdate(c_->inner, pad, sizeof pad) == 1);
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = block[i] ^ 0x5c;
  GK_CHECK(EVP_DigestInit_ex(c_->outer, c_->md, nullptr) == 1 && EVP_DigestUpdate(c_->outer, pad, sizeof pad) == 1);
  std::memset(block, 0, sizeof block);
  std::memset(pad, 0, sizeof pad);
}

Hasher::~Hasher() {
  EVP_MD_CTX_free(c_->work);
  EVP_MD_CTX_free(c_->inner);
  EVP_MD_CTX_free(c_->outer);
  EVP_MD_free(c_->md);
}

Hash Hasher::Link(const Hash& prev, uint64_t seq, absl::string_view json) {
  unsigned char seq_bytes[8];
  for (int i = 0; i < 8; ++i) seq_bytes[i] = static_cast<unsigned char>((seq >> (8 * i)) & 0xFF);
  Hash out;
  unsigned int n = 0;
  GK_CHECK(EVP_DigestInit_ex(c_->work, c_->md, nullptr) == 1 &&
           EVP_DigestUpdate(c_->work, prev.data(), prev.size()) == 1 &&
           EVP_DigestUpdate(c_->work, seq_bytes, sizeof seq_bytes) == 1 &&
           EVP_DigestUpdate(c_->work, json.data(), json.size()) == 1 &&
           EVP_DigestFinal_ex(c_->work, out.data(), &n) == 1);
  return out;
}

Hash Hasher::Mac(absl::string_view data) {
  GK_CHECK(keyed_);
  Hash inner, out;
  unsigned int n = 0;
  GK_CHECK(EVP_MD_CTX_copy_ex(c_->work, c_->inner) == 1 && EVP_DigestUpdate(c_->work, data.data(), data.size()) == 1 &&
           EVP_DigestFinal_ex(c_->work, inner.data(), &n) == 1);
  GK_CHECK(EVP_MD_CTX_copy_ex(c_->work, c_->outer) == 1 && EVP_DigestUpdate(c_->work, inner.data(), inner.size()) == 1 &&
           EVP_DigestFinal_ex(c_->work, out.data(), &n) == 1);
  return out;
}

namespace {

// An anchor's first 60 bytes: what its HMAC covers.
std::string AnchorPrefix(const Anchor& a, bool with_hmac) {
  std::string out;
  out.reserve(kAnchorSize);
  out.append(kAnchorMagic, sizeof kAnchorMagic);
  store::Encoder e(&out);
  e.PutFixed64(a.seq);
  e.PutFixed64(static_cast<uint64_t>(absl::ToUnixMicros(a.time)));
  AppendHash(a.chain, &out);
  e.PutFixed32(with_hmac ? 1 : 0);
  return out;
}

// Replaces dir/name with `bytes`: a temporary file, fsync, rename,
// directory fsync.
absl::Status WriteAtomically(store::FileSystem* fs, const std::string& dir, const char* name,
                             absl::string_view bytes) {
  const std::string path = store::JoinPath(dir, name);
  const std::string tmp = path + ".tmp";
  absl::StatusOr<std::unique_ptr<store::WritableFile>> f = fs->Create(tmp);
  if (!f.ok()) return f.status();
  absl::Status s = (*f)->Append(bytes);
  if (s.ok()) s = (*f)->Sync();
  (void)(*f)->Close();
  if (s.ok()) s = fs->Rename(tmp, path);
  if (s.ok()) s = fs->SyncDir(dir);
  return s;
}

}  // namespace

std::string EncodeAnchor(const Anchor& a, Hasher* hasher) {
  const bool keyed = hasher != nullptr && hasher->keyed();
  std::string out = AnchorPrefix(a, keyed);
  AppendHash(keyed ? hasher->Mac(out) : Hash{}, &out);
  store::Encoder(&out).PutFixed32(store::Crc32c(out));
  return out;
}

std::optional<Anchor> LastAnchor(absl::string_view bytes, int* bad) {
  if (bad != nullptr) *bad = 0;
  for (size_t slots = bytes.size() / kAnchorSize; slots > 0; --slots) {
    const absl::string_view slot = bytes.substr((slots - 1) * kAnchorSize, kAnchorSize);
    // magic, seq, time, chain (4 × 8 bytes), flags, HMAC (4 × 8 bytes), CRC
    store::Decoder d(slot, "anchor");
    uint64_t magic = 0, seq = 0, micros = 0, hash_part = 0;
    uint32_t flags = 0, crc = 0;
    bool whole = d.GetFixed64(&magic) && d.GetFixed64(&seq) && d.GetFixed64(&micros);
    for (int i = 0; i < 4; ++i) whole = whole && d.GetFixed64(&hash_part);
    whole = whole && d.GetFixed32(&flags);
    for (int i = 0; i < 4; ++i) whole = whole && d.GetFixed64(&hash_part);
    whole = whole && d.GetFixed32(&crc);
    if (!whole || slot.substr(0, 8) != absl::string_view(kAnchorMagic, 8) || crc != store::Crc32c(slot.substr(0, 92))) {
      if (bad != nullptr) ++*bad;
      continue;
    }
    return Anchor{seq, absl::FromUnixMicros(static_cast<int64_t>(micros)), HashAt(slot.data() + 24), (flags & 1) != 0,
                  HashAt(slot.data() + 60)};
  }
  return std::nullopt;
}

bool AnchorMacMatches(const Anchor& a, Hasher* hasher) {
  return a.has_hmac && hasher->keyed() && hasher->Mac(AnchorPrefix(a, true)) == a.hmac;
}

Chain::Chain(store::FileSystem* fs, std::string dir, std::string hmac_key)
    : fs_(fs), dir_(std::move(dir)), sealer_(hmac_key), head_hasher_(std::move(hmac_key)) {}

Chain::~Chain() {
  absl::MutexLock lock(&head_mu_);
  if (head_file_ != nullptr) {
    // The last HEAD is worth an fsync at a clean stop.
    (void)head_file_->Sync();
    (void)head_file_->Close();
  }
}

void Chain::Start(const Anchor& last) {
  {
    absl::MutexLock lock(&seal_mu_);
    sealed_ = last;
  }
  {
    absl::MutexLock lock(&ack_mu_);
    acked_ = last;
    written_seq_ = last.seq;
  }
  WriteHead(last, /*rewrite=*/true);
}

store::Sealer Chain::SealerFor(Call* call) {
  return [this, call](uint64_t seq, absl::string_view payload, std::string* tail) {
    absl::MutexLock lock(&seal_mu_);
    if (call->sealed == 0) call->before = sealed_;
    const absl::Time time = (*call->times)[std::min(call->sealed, call->times->size() - 1)];
    ++call->sealed;
    sealed_ = Anchor{seq, time, sealer_.Link(sealed_.chain, seq, payload), false, {}};
    AppendHash(sealed_.chain, tail);
    if (sealer_.keyed()) {
      sealed_.has_hmac = true;
      sealed_.hmac = sealer_.Mac(absl::string_view(reinterpret_cast<const char*>(sealed_.chain.data()), 32));
      AppendHash(sealed_.hmac, tail);
    }
    tail->push_back(static_cast<char>(sealer_.keyed() ? kSealChainHmac : kSealChain));
    call->last = sealed_;
  };
}

void Chain::Acknowledged(const Anchor& last) {
  {
    absl::MutexLock lock(&ack_mu_);
    if (last.seq > acked_.seq) acked_ = last;
    if (writing_) return;  // the writer takes it along
    writing_ = true;
  }
  while (true) {
    Anchor next;
    {
      absl::MutexLock lock(&ack_mu_);
      if (acked_.seq <= written_seq_) {
        writing_ = false;
        return;
      }
      next = acked_;
      written_seq_ = next.seq;
    }
    WriteHead(next, /*rewrite=*/false);
  }
}

Anchor Chain::head() const {
  absl::MutexLock lock(&ack_mu_);
  return acked_;
}

void Chain::WriteHead(const Anchor& a, bool rewrite) {
  absl::MutexLock lock(&head_mu_);
  const std::string bytes = EncodeAnchor(a, &head_hasher_);
  absl::Status s;
  if (rewrite || head_file_ == nullptr || head_bytes_ >= kHeadRewriteBytes) {
    if (head_file_ != nullptr) {
      (void)head_file_->Close();
      head_file_.reset();
    }
    s = WriteAtomically(fs_, dir_, kHeadFile, bytes);
    absl::StatusOr<std::unique_ptr<store::WritableFile>> reopened =
        s.ok() ? fs_->OpenAppend(store::JoinPath(dir_, kHeadFile)) : s;
    s = reopened.status();
    if (s.ok()) {
      head_file_ = *std::move(reopened);
      head_bytes_ = kAnchorSize;
    }
  } else {
    s = head_file_->Append(bytes);
    if (s.ok()) {
      head_bytes_ += kAnchorSize;
    } else {
      head_file_.reset();  // a short write misaligns the file: the next one replaces it
    }
  }
  if (!s.ok() && !head_failed_) {
    base::GetLogger("audit")->error("audit: cannot write {}/{} ({}); a cut-off tail of the log will not show",
                                    dir_, kHeadFile, s.message());
  }
  head_failed_ = !s.ok();
}

absl::Status Chain::WriteBase(const Anchor& before_first_kept) {
  std::string bytes;
  {
    absl::MutexLock lock(&head_mu_);
    bytes = EncodeAnchor(before_first_kept, &head_hasher_);
  }
  return WriteAtomically(fs_, dir_, kBaseFile, bytes);
}

void Chain::SegmentStarted(uint64_t first_seq, const Anchor& before) {
  absl::MutexLock lock(&head_mu_);
  before_segment_[first_seq] = before;
}

std::optional<Anchor> Chain::Before(uint64_t first_seq) const {
  absl::MutexLock lock(&head_mu_);
  auto it = before_segment_.find(first_seq);
  if (it == before_segment_.end()) return std::nullopt;
  return it->second;
}

void Chain::ForgetBefore(uint64_t first_seq) {
  absl::MutexLock lock(&head_mu_);
  before_segment_.erase(before_segment_.begin(), before_segment_.lower_bound(first_seq));
}

}  // namespace gangkeeper::audit
