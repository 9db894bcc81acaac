// A catalog document in the shape awp::rest::catalog_query() returns, built field by field, for
// the data API's unit tests (decode() without a server). Header-only test support.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "awp/core/json.hpp"
#include "awp/rest/schema.hpp"

namespace awp::test::rest_catalog {

using awp::rest::qualified_name;
namespace core = awp::core;

struct col {
    std::string name;
    std::string type = "integer";
    bool nullable = true;
    const char* def = nullptr;  // the default's expression
    char identity = '\0';       // 'a' ALWAYS, 'd' BY DEFAULT
    char generated = '\0';      // 's' STORED
};

struct key_spec {
    std::string name;
    std::string type;  // p, f, f_ref
    std::vector<int> cols;
};

struct target_spec {
    int resno;
    std::string name;
    unsigned table;
    int column;
    bool junk = false;
};

struct param_spec {
    std::string name;
    std::string type;
    bool has_default = false;
};

class catalog {
public:
    catalog& table(const std::string& schema, const std::string& name, const std::vector<col>& cols,
                   const std::vector<std::string>& pk, char kind = 'r', bool rls = true) {
        core_.w.StartObject();
        core_.kv("schema", schema);
        core_.kv("name", name);
        core_.kv("kind", std::string(1, kind));
        core_.key("rls");
        core_.w.Bool(rls);
        core_.key("description");
        core_.w.Null();
        for (const char* flag : {"insertable", "updatable", "deletable"}) {
            core_.key(flag);
            core_.w.Bool(kind == 'r' || kind == 'p');
        }
        core_.key("pk");
        core_.w.StartArray();
        for (const auto& p : pk) core_.str(p);
        core_.w.EndArray();
        core_.key("columns");
        core_.w.StartArray();
        int position = 0;
        for (const auto& c : cols) {
            core_.w.StartObject();
            core_.kv("name", c.name);
            core_.kv("type", c.type);
            core_.kv("base_type", c.type);
            core_.kv("category", c.type == "text" ? "S" : "N");
            core_.key("is_array");
            core_.w.Bool(false);
            core_.key("nullable");
            core_.w.Bool(c.nullable);
            core_.key("default");
            if (c.def != nullptr) {
                core_.str(c.def);
            } else {
                core_.w.Null();
            }
            core_.kv("identity", c.identity ? std::string(1, c.identity) : "");
            core_.kv("generated", c.generated ? std::string(1, c.generated) : "");
            core_.key("position");
            core_.w.Int(++position);
            core_.key("description");
            core_.w.Null();
            core_.w.EndObject();
        }
        core_.w.EndArray();
        core_.w.EndObject();
        tables_ += core_take();
        return *this;
    }

    catalog& fk(const std::string& constraint, const qualified_name& from,
                const std::vector<std::pair<std::string, std::string>>& cols,
                const qualified_name& to, bool one_to_one = false) {
        core_.w.StartObject();
        core_.kv("constraint", constraint);
        core_.kv("schema", from.schema);
        core_.kv("table", from.name);
        core_.kv("fschema", to.schema);
        core_.kv("ftable", to.name);
        core_.key("columns");
        core_.w.StartArray();
        for (const auto& [c, f] : cols) {
            core_.w.StartArray();
            core_.str(c);
            core_.str(f);
            core_.w.EndArray();
        }
        core_.w.EndArray();
        core_.key("one_to_one");
        core_.w.Bool(one_to_one);
        core_.w.EndObject();
        fks_ += core_take();
        return *this;
    }

    /// A relation the views read (or a view), with its keys and, for a view, its query tree.
    catalog& view_rel(unsigned oid, const qualified_name& id, char kind,
                      const std::vector<std::string>& columns, const std::vector<key_spec>& keys,
                      const std::string& action = {}) {
        core_.w.StartObject();
        core_.key("oid");
        core_.w.Uint(oid);
        core_.kv("schema", id.schema);
        core_.kv("name", id.name);
        core_.kv("kind", std::string(1, kind));
        core_.key("columns");
        core_.w.StartArray();
        for (std::size_t i = 0; i < columns.size(); ++i) {
            core_.w.StartArray();
            core_.w.Int(static_cast<int>(i + 1));
            core_.str(columns[i]);
            core_.w.EndArray();
        }
        core_.w.EndArray();
        core_.key("keys");
        core_.w.StartArray();
        for (const auto& k : keys) {
            core_.w.StartObject();
            core_.kv("name", k.name);
            core_.kv("type", k.type);
            core_.key("cols");
            core_.w.StartArray();
            for (int c : k.cols) core_.w.Int(c);
            core_.w.EndArray();
            core_.w.EndObject();
        }
        core_.w.EndArray();
        core_.key("action");
        if (action.empty()) {
            core_.w.Null();
        } else {
            core_.str(action);
        }
        core_.w.EndObject();
        view_rels_ += core_take();
        return *this;
    }

    catalog& function(const qualified_name& id, unsigned oid, const std::vector<param_spec>& params,
                      const std::string& returns = "integer", bool set = false,
                      std::optional<qualified_name> table = std::nullopt, char volatility = 'v') {
        core_.w.StartObject();
        core_.kv("schema", id.schema);
        core_.kv("name", id.name);
        core_.key("oid");
        core_.w.Uint(oid);
        core_.key("description");
        core_.w.Null();
        core_.key("params");
        core_.w.StartArray();
        for (const auto& p : params) {
            core_.w.StartObject();
            core_.kv("name", p.name);
            core_.kv("type", p.type);
            core_.kv("base_type", p.type);
            core_.kv("cast_type", p.type == "character" ? "character varying" : p.type);
            core_.key("has_default");
            core_.w.Bool(p.has_default);
            core_.key("variadic");
            core_.w.Bool(false);
            core_.w.EndObject();
        }
        core_.w.EndArray();
        core_.kv("volatility", std::string(1, volatility));
        core_.key("returns_set");
        core_.w.Bool(set);
        core_.key("returns_composite");
        core_.w.Bool(table.has_value());
        core_.key("returns_void");
        core_.w.Bool(returns == "void");
        core_.kv("return_type", table ? table->schema + "." + table->name : returns);
        core_.kv("return_base_type", table ? table->schema + "." + table->name : returns);
        core_.kv("return_category", table ? "C" : "N");
        core_.key("return_type_name");
        core_.w.StartObject();
        core_.kv("schema", table ? table->schema : "pg_catalog");
        core_.kv("name", table ? table->name : returns);
        core_.w.EndObject();
        core_.key("returns_table");
        if (table) {
            core_.w.StartObject();
            core_.kv("schema", table->schema);
            core_.kv("name", table->name);
            core_.w.EndObject();
        } else {
            core_.w.Null();
        }
        core_.key("rows");
        core_.w.Int(set ? 1000 : 0);
        core_.w.EndObject();
        functions_ += core_take();
        return *this;
    }

    catalog& computed(const qualified_name& fn, const qualified_name& from,
                      const qualified_name& to, bool single_row) {
        core_.w.StartObject();
        core_.kv("schema", fn.schema);
        core_.kv("name", fn.name);
        for (const auto& [k, q] : {std::pair{"table", from}, std::pair{"ftable", to}}) {
            core_.key(k);
            core_.w.StartObject();
            core_.kv("schema", q.schema);
            core_.kv("name", q.name);
            core_.w.EndObject();
        }
        core_.key("single_row");
        core_.w.Bool(single_row);
        core_.w.EndObject();
        computed_ += core_take();
        return *this;
    }

    catalog& role(const std::string& name,
                  const std::vector<std::pair<std::string, std::string>>& settings) {
        core_.w.StartObject();
        core_.kv("role", name);
        core_.key("settings");
        core_.w.StartArray();
        for (const auto& [k, v] : settings) {
            core_.w.StartArray();
            core_.str(k);
            core_.str(v);
            core_.w.EndArray();
        }
        core_.w.EndArray();
        core_.w.EndObject();
        roles_ += core_take();
        return *this;
    }

    [[nodiscard]] std::string json() const {
        return R"({"server_version_num":"150020","tables":[)" + tables_ + R"(],"fks":[)" + fks_ +
               R"(],"view_rels":[)" + view_rels_ + R"(],"functions":[)" + functions_ +
               R"(],"computed":[)" + computed_ + R"(],"roles":[)" + roles_ + "]}";
    }

private:
    // Each piece is written alone, then appended with a comma where one is due.
    std::string core_take() {
        std::string s = core_.str();
        core_.buf.Clear();
        core_.w.Reset(core_.buf);
        return s;
    }
    struct joined {
        std::string text;
        joined& operator+=(const std::string& piece) {
            if (!text.empty()) text += ",";
            text += piece;
            return *this;
        }
        friend std::string operator+(const std::string& a, const joined& b) { return a + b.text; }
    };
    awp::core::json::writer core_;
    joined tables_, fks_, view_rels_, functions_, computed_, roles_;
};

}  // namespace awp::test::rest_catalog
