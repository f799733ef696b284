#include "core/config.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "core/images.h"
#include "nlohmann/json.hpp"

namespace sandgate::core {
namespace {

using nlohmann::json;

// Reads the keys of one JSON object into fields, refusing keys nobody reads.
class ObjectReader {
 public:
  ObjectReader(const json& obj, std::string path) : obj_(obj), path_(std::move(path)) {}

  template <typename Fn>
  void On(const std::string& key, Fn fn) {
    handlers_[key] = fn;
  }
  absl::Status Run() {
    if (!obj_.is_object())
      return errors::InvalidArgument(absl::StrCat(Where(""), "expected an object"));
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      auto h = handlers_.find(it.key());
      if (h == handlers_.end()) {
        std::vector<std::string> known;
        for (const auto& [k, _] : handlers_) known.push_back(k);
        return errors::InvalidArgument(
            absl::StrCat(Where(it.key()), "unknown key (known: ", absl::StrJoin(known, ", "), ")"));
      }
      SANDGATE_RETURN_IF_ERROR(h->second(it.value(), Where(it.key())));
    }
    return absl::OkStatus();
  }

 private:
  std::string Where(const std::string& key) const {
    std::string p = path_.empty() ? key : (key.empty() ? path_ : absl::StrCat(path_, ".", key));
    return p.empty() ? "" : absl::StrCat(p, ": ");
  }
  const json& obj_;
  std::string path_;
  std::map<std::string, std::function<absl::Status(const json&, const std::string&)>> handlers_;
};

auto String(std::string* out) {
  return [out](const json& v, const std::string& where) -> absl::Status {
    if (!v.is_string()) return errors::InvalidArgument(absl::StrCat(where, "expected a string"));
    *out = v.get<std::string>();
    return absl::OkStatus();
  };
}
auto Bool(bool* out) {
  return [out](const json& v, const std::string& where) -> absl::Status {
    if (!v.is_boolean())
      return errors::InvalidArgument(absl::StrCat(where, "expected true or false"));
    *out = v.get<bool>();
    return absl::OkStatus();
  };
}
template <typename T>
auto Whole(T* out, uint64_t min = 0) {
  return [out, min](const json& v, const std::string& where) -> absl::Status {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      return errors::InvalidArgument(absl::StrCat(where, "expected a whole number"));
    }
    uint64_t x = v.get<uint64_t>();
    if (x < min || x > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return errors::InvalidArgument(absl::StrCat(where, "out of range: ", x));
    }
    *out = static_cast<T>(x);
    return absl::OkStatus();
  };
}
auto Seconds(absl::Duration* out) {
  return [out](const json& v, const std::string& where) -> absl::Status {
    if (!v.is_number() || v.get<double>() <= 0) {
      return errors::InvalidArgument(absl::StrCat(where, "expected a positive number of seconds"));
    }
    *out = absl::Seconds(v.get<double>());
    return absl::OkStatus();
  };
}

auto Strings(std::vector<std::string>* out) {
  return [out](const json& v, const std::string& where) -> absl::Status {
    if (!v.is_array())
      return errors::InvalidArgument(absl::StrCat(where, "expected a list of strings"));
    for (const json& e : v) {
      if (!e.is_string())
        return errors::InvalidArgument(absl::StrCat(where, "expected a list of strings"));
      out->push_back(e.get<std::string>());
    }
    return absl::OkStatus();
  };
}

// INVALID_ARGUMENT at `where` unless `level` is an isolation level.
absl::Status CheckIsolation(const std::string& level, const std::string& where) {
  if (level == "namespaces" || level == "gvisor") return absl::OkStatus();
  return errors::InvalidArgument(
      absl::StrCat(where, ": '", level, "' is not an isolation level (namespaces or gvisor)"));
}

absl::Status ReadTenant(const json& v, const std::string& where, TenantConfig* t) {
  ObjectReader r(v, where);
  r.On("name", String(&t->name));
  r.On("token_sha256", String(&t->token_sha256));
  r.On("operator", Bool(&t->is_operator));
  r.On("policy", [t, where](const json& p, const std::string&) -> absl::Status {
    ObjectReader pr(p, where + ".policy");
    pr.On("providers", Strings(&t->policy.providers));
    pr.On("agents", Strings(&t->policy.agents));
    pr.On("models", Strings(&t->policy.models));
    pr.On("network_modes", Strings(&t->policy.network_modes));
    pr.On("domains", Strings(&t->policy.domains));
    pr.On("max_memory_bytes", Whole(&t->policy.max_memory_bytes, 16ull << 20));
    pr.On("max_run_seconds", Seconds(&t->policy.max_run_time));
    pr.On("isolation_levels", Strings(&t->policy.isolation_levels));
    pr.On("default_isolation", String(&t->policy.default_isolation));
    pr.On("images", Strings(&t->policy.images));
    pr.On("build_images", Bool(&t->policy.build_images));
    SANDGATE_RETURN_IF_ERROR(pr.Run());
    for (const std::string& image : t->policy.images) {
      if (image == kHostImage) continue;
      if (absl::Status st = ValidateImageName(image); !st.ok()) {
        return errors::InvalidArgument(absl::StrCat(where, ".policy.images: ", st.message()));
      }
    }
    for (const std::string& level : t->policy.isolation_levels) {
      SANDGATE_RETURN_IF_ERROR(CheckIsolation(level, where + ".policy.isolation_levels"));
    }
    if (!t->policy.default_isolation.empty()) {
      SANDGATE_RETURN_IF_ERROR(
          CheckIsolation(t->policy.default_isolation, where + ".policy.default_isolation"));
      const auto& allowed = t->policy.isolation_levels;
      if (!allowed.empty() &&
          std::find(allowed.begin(), allowed.end(), t->policy.default_isolation) == allowed.end()) {
        return errors::InvalidArgument(absl::StrCat(where, ".policy.default_isolation: '",
                                                    t->policy.default_isolation,
                                                    "' is not one of its isolation_levels"));
      }
    }
    for (const std::string& m : t->policy.network_modes) {
      if (m != "disabled" && m != "restricted" && m != "enabled") {
        return errors::InvalidArgument(absl::StrCat(where, ".policy.network_modes: '", m,
                                                    "' is not disabled, restricted or enabled"));
      }
    }
    return absl::OkStatus();
  });
  r.On("quotas", [t, where](const json& q, const std::string&) -> absl::Status {
    ObjectReader qr(q, where + ".quotas");
    qr.On("concurrent_runs", Whole(&t->quotas.concurrent_runs));
    qr.On("live_sessions", Whole(&t->quotas.live_sessions));
    qr.On("runs_per_minute", Whole(&t->quotas.runs_per_minute));
    return qr.Run();
  });
  SANDGATE_RETURN_IF_ERROR(r.Run());
  if (t->name.empty()) return errors::InvalidArgument(absl::StrCat(where, ".name: required"));
  t->token_sha256 = absl::AsciiStrToLower(t->token_sha256);
  if (t->token_sha256.size() != 64 ||
      t->token_sha256.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return errors::InvalidArgument(
        absl::StrCat(where,
                     ".token_sha256: expected 64 hex digits (sha256 of the token, e.g. "
                     "`printf %s TOKEN | sha256sum`)"));
  }
  return absl::OkStatus();
}

absl::Status ReadUpstream(const json& v, const std::string& section, bool with_containers,
                          UpstreamConfig* u) {
  ObjectReader r(v, section);
  r.On("base_url", String(&u->base_url));
  r.On("api_key_file", String(&u->api_key_file));
  r.On("api_key_env", String(&u->api_key_env));
  r.On("model", String(&u->model));
  r.On("max_turns", Whole(&u->max_turns, 1));
  r.On("request_timeout_seconds", Seconds(&u->request_timeout));
  if (with_containers) {
    r.On("container_memory_limit", String(&u->container_memory_limit));
    r.On("container_expires_after_minutes", Whole(&u->container_expires_after_minutes, 1));
    r.On("container_create_settle_seconds", Seconds(&u->container_create_settle));
  }
  SANDGATE_RETURN_IF_ERROR(r.Run());
  if (!u->api_key_file.empty() && !u->api_key_env.empty()) {
    return errors::InvalidArgument(
        absl::StrCat(section, ": set api_key_file or api_key_env, not both"));
  }
  if (!u->base_url.empty() && !absl::StartsWith(u->base_url, "http://") &&
      !absl::StartsWith(u->base_url, "https://")) {
    return errors::InvalidArgument(
        absl::StrCat(section, ".base_url: expected http:// or https://, got '", u->base_url, "'"));
  }
  if (with_containers) {
    static const char* kLimits[] = {"1g", "4g", "16g", "64g"};
    if (std::find(std::begin(kLimits), std::end(kLimits), u->container_memory_limit) ==
        std::end(kLimits)) {
      return errors::InvalidArgument(
          absl::StrCat(section, ".container_memory_limit: one of 1g, 4g, 16g, 64g"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadWarmShape(const json& v, const std::string& where, WarmPoolShape* s) {
  ObjectReader r(v, where);
  r.On("size", Whole(&s->size, 1));
  r.On("memory_bytes", Whole(&s->memory_bytes, 16ull << 20));
  r.On("max_processes", Whole(&s->max_processes, 8));
  r.On("workspace_bytes", Whole(&s->workspace_bytes, 1ull << 20));
  r.On("network_mode", String(&s->network_mode));
  r.On("allowed_domains", Strings(&s->allowed_domains));
  r.On("isolation", String(&s->isolation));
  r.On("image", String(&s->image));
  SANDGATE_RETURN_IF_ERROR(r.Run());
  if (!s->image.empty() && s->image != kHostImage) {
    if (absl::Status st = ValidateImageName(s->image); !st.ok()) {
      return errors::InvalidArgument(absl::StrCat(where, ".image: ", st.message()));
    }
  }
  if (!s->isolation.empty()) {
    SANDGATE_RETURN_IF_ERROR(CheckIsolation(s->isolation, where + ".isolation"));
  }
  if (s->network_mode != "disabled" && s->network_mode != "restricted" &&
      s->network_mode != "enabled") {
    return errors::InvalidArgument(
        absl::StrCat(where, ".network_mode: expected disabled, restricted or enabled, got '",
                     s->network_mode, "'"));
  }
  if (s->network_mode != "restricted" && !s->allowed_domains.empty()) {
    return errors::InvalidArgument(
        absl::StrCat(where, ".allowed_domains: only for network_mode restricted"));
  }
  return absl::OkStatus();
}

absl::Status ReadStore(const json& v, StoreConfig* s) {
  ObjectReader r(v, "store");
  r.On("type", String(&s->type));
  r.On("dsn", String(&s->dsn));
  r.On("password_file", String(&s->password_file));
  r.On("pool_size", Whole(&s->pool_size, 1));
  SANDGATE_RETURN_IF_ERROR(r.Run());
  if (s->type == "sqlite") {
    if (!s->dsn.empty() || !s->password_file.empty()) {
      return errors::InvalidArgument(
          "store.dsn, store.password_file: only for type postgres (sqlite keeps "
          "state_dir/state.db)");
    }
    return absl::OkStatus();
  }
  if (s->type != "postgres") {
    return errors::InvalidArgument(
        absl::StrCat("store.type: expected sqlite or postgres, got '", s->type, "'"));
  }
  if (s->dsn.empty()) {
    return errors::InvalidArgument(
        "store.dsn: required for type postgres (e.g. \"host=/run/postgresql dbname=sandgate "
        "user=sandgate\")");
  }
  // The DSN is not parsed here (libpq does, at start, and refuses a password in it there
  // too); this catches the plain mistake early, naming the key and never echoing the value.
  const std::string lower = absl::AsciiStrToLower(s->dsn);
  const size_t scheme = lower.find("://");
  const size_t at = lower.find('@');
  const bool uri_password =
      scheme != std::string::npos && at != std::string::npos &&
      lower.substr(scheme + 3, at - scheme - 3).find(':') != std::string::npos;
  // The keyword, not the word: a user may be called sg_password_user.
  bool keyword = false;
  for (size_t at_kw = lower.find("password"); at_kw != std::string::npos && !keyword;
       at_kw = lower.find("password", at_kw + 1)) {
    const size_t next = lower.find_first_not_of(" \t", at_kw + 8);
    const bool starts =
        at_kw == 0 || std::string(" \t?&").find(lower[at_kw - 1]) != std::string::npos;
    keyword = starts && next != std::string::npos && lower[next] == '=';
  }
  if (keyword || uri_password) {
    return errors::InvalidArgument(
        "store.dsn: must not hold a password (password=…); put it in store.password_file");
  }
  return absl::OkStatus();
}

absl::Status ReadTls(const json& v, const std::string& where, TlsConfig* t) {
  ObjectReader r(v, where);
  r.On("cert_file", String(&t->cert_file));
  r.On("key_file", String(&t->key_file));
  r.On("client_ca_file", String(&t->client_ca_file));
  r.On("require_client_cert", Bool(&t->require_client_cert));
  r.On("reload_interval_seconds", Whole(&t->reload_interval_seconds, 1));
  SANDGATE_RETURN_IF_ERROR(r.Run());
  if (t->cert_file.empty() || t->key_file.empty()) {
    return errors::InvalidArgument(
        absl::StrCat(where, ": cert_file and key_file are both required"));
  }
  if (t->require_client_cert && t->client_ca_file.empty()) {
    return errors::InvalidArgument(absl::StrCat(
        where,
        ".require_client_cert: needs client_ca_file (the CA that signs client certificates)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Config> ParseConfig(const std::string& text, const std::string& origin) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (doc.is_discarded()) return errors::InvalidArgument(absl::StrCat(origin, ": not valid JSON"));
  Config c;
  ObjectReader r(doc, "");
  r.On("listen", String(&c.listen));
  r.On("state_dir", String(&c.state_dir));
  r.On("store",
       [&c](const json& v, const std::string&) -> absl::Status { return ReadStore(v, &c.store); });
  r.On("log_level", String(&c.log_level));
  r.On("metrics_listen", String(&c.metrics_listen));
  r.On("http_listen", String(&c.http_listen));
  r.On("retention_hours", [&c](const json& v, const std::string& where) -> absl::Status {
    if (!v.is_number() || v.get<double>() < 0)
      return errors::InvalidArgument(absl::StrCat(where, "expected hours, 0 or more"));
    c.retention = absl::Hours(v.get<double>());
    return absl::OkStatus();
  });
  r.On("allow_unauthenticated_tcp", Bool(&c.allow_unauthenticated_tcp));
  r.On("allow_plaintext_tokens", Bool(&c.allow_plaintext_tokens));
  r.On("tls", [&c](const json& v, const std::string&) { return ReadTls(v, "tls", &c.tls); });
  r.On("max_concurrent_runs", Whole(&c.max_concurrent_runs, 1));
  r.On("max_concurrent_execs", Whole(&c.max_concurrent_execs, 1));
  r.On("max_queued_runs", Whole(&c.max_queued_runs, 1));
  r.On("max_queued_input_bytes", Whole(&c.max_queued_input_bytes, 1));
  r.On("max_sandboxes", Whole(&c.max_sandboxes, 1));
  r.On("max_input_bytes", Whole(&c.max_input_bytes, 1));
  r.On("max_artifact_bytes", Whole(&c.max_artifact_bytes, 1));
  r.On("tenants", [&c](const json& v, const std::string& where) -> absl::Status {
    if (!v.is_array()) return errors::InvalidArgument(absl::StrCat(where, "expected a list"));
    for (size_t i = 0; i < v.size(); ++i) {
      TenantConfig t;
      SANDGATE_RETURN_IF_ERROR(ReadTenant(v[i], absl::StrCat("tenants[", i, "]"), &t));
      for (const auto& other : c.tenants) {
        if (other.name == t.name) {
          return errors::InvalidArgument(
              absl::StrCat("tenants[", i, "].name: duplicate tenant '", t.name, "'"));
        }
        if (other.token_sha256 == t.token_sha256) {
          return errors::InvalidArgument(absl::StrCat(
              "tenants[", i, "].token_sha256: same token as tenant '", other.name, "'"));
        }
      }
      c.tenants.push_back(std::move(t));
    }
    return absl::OkStatus();
  });
  r.On("defaults", [&c](const json& v, const std::string& where) -> absl::Status {
    ObjectReader d(v, "defaults");
    d.On("memory_bytes", Whole(&c.memory_bytes, 16ull << 20));
    d.On("max_processes", Whole(&c.max_processes, 8));
    d.On("workspace_bytes", Whole(&c.workspace_bytes, 1ull << 20));
    d.On("command_timeout_seconds", Seconds(&c.command_timeout));
    d.On("run_timeout_seconds", Seconds(&c.run_timeout));
    d.On("heartbeat_seconds", Seconds(&c.heartbeat_interval));
    d.On("session_idle_timeout_seconds", Seconds(&c.session_idle_timeout));
    d.On("session_max_lifetime_seconds", Seconds(&c.session_max_lifetime));
    d.On("session_max_lifetime_limit_seconds", Seconds(&c.session_max_lifetime_limit));
    d.On("session_expiry_warning_seconds", Seconds(&c.session_expiry_warning));
    d.On("drain_grace_seconds", Seconds(&c.drain_grace));
    return d.Run();
  });
  r.On("limits", [&c](const json& v, const std::string& where) -> absl::Status {
    ObjectReader l(v, "limits");
    l.On("memory_bytes", Whole(&c.limits.memory_bytes, 16ull << 20));
    l.On("workspace_bytes", Whole(&c.limits.workspace_bytes, 1ull << 20));
    l.On("max_processes", Whole(&c.limits.max_processes, 8));
    l.On("run_timeout_seconds", Seconds(&c.limits.run_timeout));
    l.On("command_timeout_seconds", Seconds(&c.limits.command_timeout));
    return l.Run();
  });
  r.On("sandbox_events", [&c](const json& v, const std::string& where) -> absl::Status {
    ObjectReader l(v, "sandbox_events");
    l.On("per_second", Whole(&c.sandbox_events.per_second, 1));
    l.On("burst", Whole(&c.sandbox_events.burst, 1));
    l.On("max_per_log", Whole(&c.sandbox_events.max_per_log, 1));
    return l.Run();
  });
  r.On("processes", [&c](const json& v, const std::string& where) -> absl::Status {
    ObjectReader l(v, "processes");
    l.On("max_running_per_session", Whole(&c.processes.max_running_per_session, 1));
    l.On("output_buffer_bytes", Whole(&c.processes.output_buffer_bytes, 4096));
    l.On("session_buffer_bytes", Whole(&c.processes.session_buffer_bytes, 4096));
    l.On("max_read_wait_seconds", Seconds(&c.processes.max_read_wait));
    SANDGATE_RETURN_IF_ERROR(l.Run());
    if (c.processes.session_buffer_bytes < c.processes.output_buffer_bytes) {
      return errors::InvalidArgument(
          "processes.session_buffer_bytes: must be at least processes.output_buffer_bytes");
    }
    return absl::OkStatus();
  });
  r.On("ports", [&c](const json& v, const std::string& where) -> absl::Status {
    ObjectReader l(v, "ports");
    PortLimits& p = c.ports;
    l.On("max_exposed_per_session", Whole(&p.max_exposed_per_session, 1));
    l.On("max_connections_per_session", Whole(&p.max_connections_per_session, 1));
    l.On("max_connections", Whole(&p.max_connections, 1));
    l.On("max_body_bytes", Whole(&p.max_body_bytes, 0));
    l.On("max_header_bytes", Whole(&p.max_header_bytes, 1024));
    l.On("max_connection_bytes", Whole(&p.max_connection_bytes, 4096));
    l.On("idle_timeout_seconds", Seconds(&p.idle_timeout));
    l.On("connect_timeout_seconds", Seconds(&p.connect_timeout));
    l.On("max_signed_ttl_seconds", Seconds(&p.max_signed_ttl));
    l.On("default_signed_ttl_seconds", Seconds(&p.default_signed_ttl));
    l.On("signing_key_file", String(&p.signing_key_file));
    l.On("public_url", String(&p.public_url));
    SANDGATE_RETURN_IF_ERROR(l.Run());
    if (p.default_signed_ttl > p.max_signed_ttl) {
      return errors::InvalidArgument(
          "ports.default_signed_ttl_seconds: must not be over ports.max_signed_ttl_seconds");
    }
    return absl::OkStatus();
  });
  r.On("snapshots", [&c](const json& v, const std::string& where) -> absl::Status {
    ObjectReader l(v, "snapshots");
    l.On("max_bytes", Whole(&c.snapshots.max_bytes, 1 << 20));
    l.On("max_entries", Whole(&c.snapshots.max_entries, 1));
    return l.Run();
  });
  r.On("local", [&c](const json& v, const std::string& where) -> absl::Status {
    ObjectReader l(v, "local");
    l.On("bwrap", String(&c.bwrap_path));
    l.On("init", String(&c.init_path));
    l.On("uid_base", Whole(&c.uid_base, 1000));
    l.On("uid_count", Whole(&c.uid_count, 1));
    l.On("isolation", [&c](const json& v, const std::string& where) -> absl::Status {
      SANDGATE_RETURN_IF_ERROR(String(&c.isolation)(v, where));
      return CheckIsolation(c.isolation, "local.isolation");
    });
    l.On("runsc", String(&c.runsc_path));
    l.On("mmdebstrap", String(&c.mmdebstrap_path));
    l.On("max_image_builds", Whole(&c.max_image_builds, 1));
    l.On("gvisor_platform", [&c](const json& v, const std::string& where) -> absl::Status {
      SANDGATE_RETURN_IF_ERROR(String(&c.gvisor_platform)(v, where));
      if (c.gvisor_platform == "ptrace" || c.gvisor_platform == "kvm") return absl::OkStatus();
      return errors::InvalidArgument(
          absl::StrCat("local.gvisor_platform: '", c.gvisor_platform, "' is not ptrace or kvm"));
    });
    l.On("gvisor_probe_timeout_seconds", Whole(&c.gvisor_probe_timeout_seconds, 1));
    // bwrap and the init need a few dozen; above 1 Mi is more than the kernel allows (nr_open).
    l.On("max_open_files", [&c](const json& v, const std::string& where) -> absl::Status {
      SANDGATE_RETURN_IF_ERROR(Whole(&c.max_open_files, 64)(v, where));
      if (c.max_open_files > (1u << 20))
        return errors::InvalidArgument(absl::StrCat(where, "at most 1048576"));
      return absl::OkStatus();
    });
    return l.Run();
  });
  r.On("warm_pool", [&c](const json& v, const std::string& where) -> absl::Status {
    if (!v.is_array())
      return errors::InvalidArgument(absl::StrCat(where, "expected a list of shapes"));
    for (size_t i = 0; i < v.size(); ++i) {
      WarmPoolShape shape;
      SANDGATE_RETURN_IF_ERROR(ReadWarmShape(v[i], absl::StrCat("warm_pool[", i, "]"), &shape));
      c.warm_pool.push_back(std::move(shape));
    }
    return absl::OkStatus();
  });
  r.On("replica", [&c](const json& v, const std::string&) -> absl::Status {
    ObjectReader l(v, "replica");
    l.On("id", String(&c.replica.id));
    l.On("advertise_address", String(&c.replica.advertise_address));
    l.On("lease_seconds", Seconds(&c.replica.lease_period));
    l.On("renew_seconds", Seconds(&c.replica.renew_interval));
    // Under 10 ms is a busy loop of store reads (per follower, or of claims); over a minute is
    // not "live".
    auto poll_ms = [](absl::Duration* out) {
      return [out](const json& v, const std::string& where) -> absl::Status {
        uint64_t ms = 0;
        absl::Status st = Whole(&ms, 10)(v, where);
        if (st.ok() && ms > 60000)
          st = errors::InvalidArgument(absl::StrCat(where, "at most 60000"));
        if (st.ok()) *out = absl::Milliseconds(ms);
        return st;
      };
    };
    l.On("follow_poll_ms", poll_ms(&c.replica.follow_poll));
    l.On("claim_poll_ms", poll_ms(&c.replica.claim_poll));
    return l.Run();
  });
  r.On("openai", [&c](const json& v, const std::string&) {
    return ReadUpstream(v, "openai", true, &c.openai);
  });
  r.On("chat",
       [&c](const json& v, const std::string&) { return ReadUpstream(v, "chat", false, &c.chat); });
  absl::Status st = r.Run();
  if (!st.ok()) return errors::InvalidArgument(absl::StrCat(origin, ": ", st.message()));
  if (c.chat.configured() && c.chat.base_url.empty()) {
    return errors::InvalidArgument(
        absl::StrCat(origin, ": chat.base_url: required (the OpenAI-compatible endpoint)"));
  }
  return c;
}

uint64_t DefaultWorkspaceBytes(const Config& config, uint64_t memory_bytes) {
  constexpr uint64_t kMiB = 1ull << 20;
  return std::min(config.workspace_bytes, memory_bytes / 4 / kMiB * kMiB);
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return errors::NotFound("config file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseConfig(ss.str(), path);
}

}  // namespace sandgate::core
