// What the openclaw CLI prints, read: its JSON outputs made storable (fit_json), a gateway
// restart that restarted nothing, the connected providers, the default model and a provider's
// models (see openclaw.hpp and docs/runtime.md). Pure functions.
#include <algorithm>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "awp/core/json.hpp"
#include "awp/runtime/openclaw.hpp"

namespace awp::runtime {

namespace rj = rapidjson;

// ---- JSON output ----------------------------------------------------------------------------

namespace {

std::string write_json(const rj::Value& v) {
    rj::StringBuffer buf;
    rj::Writer<rj::StringBuffer> w(buf);
    v.Accept(w);
    return {buf.GetString(), buf.GetSize()};
}

/// The longest array (by element count) anywhere in `v`, with its JSON-pointer-ish path.
void longest_array(rj::Value& v, const std::string& path, rj::Value*& best, std::string& best_path,
                   int depth = 0) {
    if (depth > 16) return;
    if (v.IsArray()) {
        if (!best || v.Size() > best->Size()) {
            best = &v;
            best_path = path.empty() ? "/" : path;
        }
        for (auto& e : v.GetArray()) longest_array(e, path + "/*", best, best_path, depth + 1);
    } else if (v.IsObject()) {
        for (auto& m : v.GetObject())
            longest_array(m.value, path + "/" + m.name.GetString(), best, best_path, depth + 1);
    }
}

}  // namespace

std::optional<std::string> fit_json(std::string_view output, std::size_t limit) {
    const auto start = output.find_first_of("{[");
    if (start == std::string_view::npos) return std::nullopt;
    auto doc = core::json::try_parse(output.substr(start), core::json::kDocument);
    if (!doc) return std::nullopt;
    std::string text = write_json(*doc);
    if (text.size() <= limit) return text;
    auto& al = doc->GetAllocator();
    // The marker first: adding a member later could move the array found below.
    if (doc->IsObject()) {
        rj::Value info(rj::kObjectType);
        info.AddMember("path", rj::Value(""), al);
        info.AddMember("kept", static_cast<uint64_t>(0), al);
        info.AddMember("total", static_cast<uint64_t>(0), al);
        doc->AddMember("awpTruncated", info, al);
    }
    rj::Value* arr = nullptr;
    std::string path;
    longest_array(*doc, "", arr, path);
    if (!arr || arr->Empty()) return std::nullopt;
    const std::size_t total = arr->Size();
    if (doc->IsObject()) {
        auto& info = (*doc)["awpTruncated"];
        info["path"].SetString(path.c_str(), static_cast<rj::SizeType>(path.size()), al);
        info["total"].SetUint64(total);
    }
    rj::Value all(*arr, al);  // a copy of the entries
    auto render = [&](std::size_t keep) {
        arr->SetArray();
        for (std::size_t i = 0; i < keep; ++i)
            arr->PushBack(rj::Value(all[static_cast<rj::SizeType>(i)], al), al);
        if (doc->IsObject()) (*doc)["awpTruncated"]["kept"].SetUint64(keep);
        return write_json(*doc);
    };
    std::size_t lo = 0, hi = total;
    while (lo < hi) {
        const std::size_t mid = (lo + hi + 1) / 2;
        if (render(mid).size() <= limit) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    text = render(lo);
    if (text.size() > limit) return std::nullopt;
    return text;
}

std::optional<std::string> restart_failure(std::string_view output) {
    auto doc = fit_json(output, std::size_t{1} << 20);
    if (!doc) return std::nullopt;
    auto d = core::json::try_parse(*doc, core::json::kDocument);
    if (!d || !d->IsObject()) return std::nullopt;
    const auto ok = d->FindMember("ok");
    const auto result = d->FindMember("result");
    const auto message = d->FindMember("message");
    const bool not_ok = ok != d->MemberEnd() && ok->value.IsBool() && !ok->value.GetBool();
    const bool not_loaded = result != d->MemberEnd() && result->value.IsString() &&
                            std::string(result->value.GetString()) == "not-loaded";
    if (!not_ok && !not_loaded) return std::nullopt;
    std::string why = message != d->MemberEnd() && message->value.IsString()
                          ? message->value.GetString()
                          : "the runtime did not restart its gateway";
    if (not_loaded) why += " (no runtime gateway service is installed or loaded on this host)";
    return why;
}

namespace {

/// The JSON document of a CLI's output (notices before it dropped), or nullopt.
std::optional<rj::Document> json_of(std::string_view output) {
    const auto start = output.find_first_of("{[");
    if (start == std::string_view::npos) return std::nullopt;
    auto d = core::json::try_parse(output.substr(start), core::json::kDocument);
    if (!d || !d->IsObject()) return std::nullopt;
    return d;
}

std::string provider_of(std::string_view model_key) {
    return std::string(model_key.substr(0, model_key.find('/')));
}

}  // namespace

std::optional<std::vector<std::string>> connected_providers(std::string_view status_output) {
    auto d = json_of(status_output);
    if (!d) return std::nullopt;
    std::vector<std::string> out;
    const auto auth = d->FindMember("auth");
    if (auth == d->MemberEnd() || !auth->value.IsObject()) return out;
    const auto providers = auth->value.FindMember("providers");
    if (providers == auth->value.MemberEnd() || !providers->value.IsArray()) return out;
    for (const auto& p : providers->value.GetArray()) {
        if (!p.IsObject() || !p.HasMember("provider") || !p["provider"].IsString()) continue;
        std::string name = p["provider"].GetString();
        if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
    }
    return out;
}

std::optional<std::string> default_model(std::string_view status_output) {
    auto d = json_of(status_output);
    if (!d) return std::nullopt;
    for (const char* k : {"defaultModel", "resolvedDefault"}) {
        const auto m = d->FindMember(k);
        if (m != d->MemberEnd() && m->value.IsString() && m->value.GetStringLength() > 0)
            return std::string(m->value.GetString(), m->value.GetStringLength());
    }
    return std::nullopt;
}

std::optional<std::string> models_of(const std::vector<std::string_view>& list_outputs,
                                     const std::vector<std::string>& providers) {
    rj::Document out(rj::kObjectType);
    auto& oal = out.GetAllocator();
    rj::Value kept(rj::kArrayType);
    for (const auto list_output : list_outputs) {
        auto d = json_of(list_output);
        if (!d) return std::nullopt;
        const auto models = d->FindMember("models");
        if (models == d->MemberEnd() || !models->value.IsArray()) return std::nullopt;
        for (auto& m : models->value.GetArray()) {
            if (!m.IsObject() || !m.HasMember("key") || !m["key"].IsString()) continue;
            const std::string p = provider_of(m["key"].GetString());
            if (std::find(providers.begin(), providers.end(), p) != providers.end())
                kept.PushBack(rj::Value(m, oal), oal);
        }
    }
    out.AddMember("count", static_cast<uint64_t>(kept.Size()), oal);
    out.AddMember("models", kept, oal);
    rj::Value names(rj::kArrayType);
    for (const auto& p : providers)
        names.PushBack(rj::Value(p.c_str(), static_cast<rj::SizeType>(p.size()), oal), oal);
    out.AddMember("providers", names, oal);
    return core::json::to_string(out);
}

std::optional<std::string> models_of(std::string_view list_output,
                                     const std::vector<std::string>& providers) {
    return models_of(std::vector<std::string_view>{list_output}, providers);
}

std::optional<std::string> first_model(std::string_view list_output, const std::string& provider) {
    auto d = json_of(list_output);
    if (!d) return std::nullopt;
    const auto models = d->FindMember("models");
    if (models == d->MemberEnd() || !models->value.IsArray()) return std::nullopt;
    std::optional<std::string> first;
    for (const auto& m : models->value.GetArray()) {
        if (!m.IsObject() || !m.HasMember("key") || !m["key"].IsString()) continue;
        const std::string key = m["key"].GetString();
        if (provider_of(key) != provider) continue;
        const auto avail = m.FindMember("available");
        if (avail != m.MemberEnd() && avail->value.IsBool() && avail->value.GetBool()) return key;
        if (!first) first = key;
    }
    return first;
}

}  // namespace awp::runtime
