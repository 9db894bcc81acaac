// Realtime's reading of the catalog on arbitrary bytes: the text parsed as a pg_node_tree under
// its limits (only parse_error expected); a tree that parses is taken as a table's SELECT policy
// and as a SQL function's body (the function the policy's first FUNCEXPR-shaped oid could name),
// the claims analysis run over it with a catalog that answers every oid it asks for, and the
// grouping key computed for a few claims. Every CONST's decoders run too.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "awp/realtime/claims.hpp"
#include "awp/realtime/node_tree.hpp"

namespace {

namespace claims = awp::realtime::claims;
namespace nt = awp::realtime::node_tree;

void consts(const nt::value& v, int depth) {
    if (depth > 600) return;
    if (v.is_node("CONST")) {
        (void)nt::const_text(v);
        (void)nt::const_integer(v);
        (void)nt::const_bool(v);
        (void)nt::const_text_array(v);
    }
    for (const auto& i : v.items) consts(i, depth + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::shared_ptr<const nt::value> tree;
    try {
        nt::limits l;
        l.max_bytes = 1 << 20;
        l.max_depth = 128;
        tree = std::make_shared<const nt::value>(nt::parse(text, l));
    } catch (const nt::parse_error&) {
        return 0;
    }
    consts(*tree, 0);
    claims::catalog c;
    c.role_oids = {{"authenticated", 1}, {"service_role", 2}};
    c.roles[1] = {"authenticated", {1}, {1}};
    claims::policy p;
    p.roles = {0};
    p.qual = tree;
    c.relations[10] = {'r', {p}};
    for (int round = 0; round < 6; ++round) {
        auto a = claims::analyze(c, 10, 1);
        if (a.missing.empty()) break;
        // Every function a SQL function whose body is the same tree, every table the same
        // table, every operator its function: the walk meets itself, as a hostile catalog would.
        for (auto f : a.missing.functions) {
            claims::function_info fi;
            fi.schema = f % 2 ? "pg_catalog" : "public";
            fi.name = "f" + std::to_string(f);
            fi.language = f % 2 ? 'i' : 's';
            fi.symbol = f % 3 ? "jsonb_object_field" : "show_config_by_name";
            fi.body = tree;
            c.functions[f] = fi;
        }
        for (auto o : a.missing.operators) c.operators[o] = o + 1;
        for (auto r : a.missing.relations) c.relations[r] = {'r', {p}};
        for (auto r : a.missing.roles) c.roles.try_emplace(r);
    }
    auto a = claims::analyze(c, 10, 1);
    for (const char* claims_json : {R"({"sub":"u","app_metadata":{"tenant_id":"t"}})", "[]", "{"}) {
        (void)claims::projection(a.r, claims_json);
    }
    return 0;
}
