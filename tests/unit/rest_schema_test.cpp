// The data API's schema cache without a server: decode() of catalog JSON written here, then
// what a client relies on from it — PostgREST's embedding rules (which relationship an embed
// means, through keys, views, junctions and functions) and its overload resolution, with the
// exact error bodies the client library's own tests compare (PGRST200-205).
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "awp/core/json.hpp"
#include "awp/rest/schema.hpp"
#include "support/rest_catalog.hpp"

namespace rest_schema_test {

namespace rest = awp::rest;
using rest::cardinality;
using rest::qualified_name;

namespace {

using awp::test::rest_catalog::catalog;
using awp::test::rest_catalog::col;
using awp::test::rest_catalog::key_spec;
using awp::test::rest_catalog::param_spec;
using awp::test::rest_catalog::target_spec;

// ---- view query trees as Postgres writes them (trimmed to the fields that matter) -----------

std::string target_list(const std::vector<target_spec>& targets) {
    std::string s = "(";
    for (const auto& t : targets) {
        s += "{TARGETENTRY :expr {VAR :varno 1 :varattno " + std::to_string(t.column) +
             " :vartype 25 :location 7} :resno " + std::to_string(t.resno) + " :resname " + t.name +
             " :ressortgroupref 0 :resorigtbl " + std::to_string(t.table) + " :resorigcol " +
             std::to_string(t.column) + " :resjunk " + (t.junk ? "true" : "false") + "} ";
    }
    return s + ")";
}

// A view's _RETURN rule: a subquery in the range table with its own target list (which must
// not be taken for the view's), a constant with its datum bytes, then the view's target list.
std::string view_action(const std::vector<target_spec>& targets) {
    return "({QUERY :commandType 1 :querySource 0 :canSetTag true :utilityStmt <> "
           ":resultRelation 0 :hasAggs false :cteList <> :rtable ({RTE :alias {ALIAS :aliasname "
           "old :colnames <>} :eref {ALIAS :aliasname old :colnames (\"a\" \"b\\ c\")} :rtekind 0} "
           "{RTE :alias <> :eref {ALIAS :aliasname sub :colnames <>} :rtekind 1 :subquery "
           "{QUERY :commandType 1 :targetList ({TARGETENTRY :expr {CONST :consttype 23 "
           ":constlen 4 :constbyval true :constisnull false :location 9 :constvalue 4 [ 1 0 0 0 "
           "0 0 0 0 ]} :resno 1 :resname one :ressortgroupref 0 :resorigtbl 999 :resorigcol 9 "
           ":resjunk false}) :override 0}}) :jointree {FROMEXPR :fromlist ({RANGETBLREF "
           ":rtindex 3}) :quals <>} :targetList " +
           target_list(targets) + " :override 0 :onConflict <> :returningList <>})";
}

// ---- the schema the tests embed in ------------------------------------------------------------

const qualified_name users{"api", "users"}, best_friends{"api", "best_friends"},
    tenants{"api", "tenants"}, agents{"api", "agents"}, tasks{"api", "tasks"},
    profiles{"api", "profiles"}, products{"api", "products"}, categories{"api", "categories"},
    product_categories{"api", "product_categories"}, lab{"api", "lab"}, messages{"api", "messages"},
    users_view{"api", "users_view"}, messages_view{"api", "messages_view"},
    recent_messages{"api", "recent_messages"}, clients{"api", "clients"},
    projects{"api", "projects"}, owners{"api", "owners"}, pets{"api", "pets"}, tags{"api", "tags"},
    user_tags{"private", "user_tags"}, secrets{"private", "secrets"};

constexpr unsigned kUsers = 100, kMessages = 101, kMessagesView = 102, kUsersView = 103,
                   kRecent = 104;

std::string api_catalog() {
    catalog c;
    c.table("api", "users",
            {{"username", "text", false},
             {"status", "text", true, "'active'::text"},
             {"serial", "bigint", false, nullptr, 'a'},
             {"shout", "text", true, nullptr, '\0', 's'}},
            {"username"})
        .table("api", "best_friends", {{"id"}, {"first_user", "text"}, {"second_user", "text"}},
               {"id"})
        .table("api", "tenants", {{"id"}}, {"id"})
        .table("api", "agents", {{"id"}, {"tenant_id"}, {"name", "text"}}, {"id"})
        .table("api", "tasks", {{"id"}, {"tenant_id"}, {"assignee_agent_id"}, {"title", "text"}},
               {"id"})
        .table("api", "profiles", {{"username", "text"}, {"bio", "text"}}, {"username"})
        .table("api", "products", {{"id"}}, {"id"})
        .table("api", "categories", {{"id"}}, {"id"})
        .table("api", "product_categories", {{"product_id"}, {"category_id"}},
               {"category_id", "product_id"})
        .table("api", "lab", {{"id"}, {"parent"}, {"main"}}, {"id"})
        .table("api", "messages", {{"id"}, {"username", "text"}}, {"id"})
        .table("api", "users_view", {{"username", "text"}, {"status", "text"}}, {}, 'v')
        .table("api", "messages_view", {{"id"}, {"author", "text"}}, {}, 'v')
        .table("api", "recent_messages", {{"id"}, {"author", "text"}}, {}, 'v')
        .table("api", "clients", {{"id"}}, {"id"})
        .table("api", "projects", {{"id"}, {"client_id"}}, {"id"})
        .table("api", "owners", {{"id"}}, {"id"})
        .table("api", "pets", {{"id"}, {"owner_id"}}, {"id"})
        .table("api", "tags", {{"id"}}, {"id"});
    c.fk("best_friends_first_user_fkey", best_friends, {{"first_user", "username"}}, users)
        .fk("best_friends_second_user_fkey", best_friends, {{"second_user", "username"}}, users)
        .fk("tasks_tenant_id_fkey", tasks, {{"tenant_id", "id"}}, tenants)
        .fk("agents_tenant_id_fkey", agents, {{"tenant_id", "id"}}, tenants)
        .fk("tasks_tenant_id_assignee_agent_id_fkey", tasks,
            {{"tenant_id", "tenant_id"}, {"assignee_agent_id", "id"}}, agents)
        .fk("profiles_username_fkey", profiles, {{"username", "username"}}, users, true)
        .fk("product_categories_product_id_fkey", product_categories, {{"product_id", "id"}},
            products)
        .fk("product_categories_category_id_fkey", product_categories, {{"category_id", "id"}},
            categories)
        .fk("lab_parent_fkey", lab, {{"parent", "id"}}, lab)
        .fk("lab_main_fkey", lab, {{"main", "id"}}, lab)
        .fk("messages_username_fkey", messages, {{"username", "username"}}, users)
        .fk("projects_client_id_fkey", projects, {{"client_id", "id"}}, clients)
        .fk("pets_owner_id_fkey", pets, {{"owner_id", "id"}}, owners)
        // outside the exposed schema: a table with a key to api, a junction between api tables
        .fk("secrets_username_fkey", secrets, {{"username", "username"}}, users)
        .fk("user_tags_username_fkey", user_tags, {{"username", "username"}}, users)
        .fk("user_tags_tag_id_fkey", user_tags, {{"tag_id", "id"}}, tags);
    // users_view shows users; messages_view shows messages (username as author);
    // recent_messages shows messages_view (a view of a view).
    c.view_rel(kUsers, users, 'r', {"username", "status"},
               {{"users_pkey", "p", {1}},
                {"messages_username_fkey", "f_ref", {1}},
                {"best_friends_first_user_fkey", "f_ref", {1}}})
        .view_rel(kMessages, messages, 'r', {"id", "username"},
                  {{"messages_pkey", "p", {1}}, {"messages_username_fkey", "f", {2}}})
        .view_rel(kUsersView, users_view, 'v', {"username", "status"}, {},
                  view_action({{1, "username", kUsers, 1}, {2, "status", kUsers, 2}}))
        .view_rel(kMessagesView, messages_view, 'v', {"id", "author"}, {},
                  view_action({{1, "id", kMessages, 1},
                               {2, "author", kMessages, 2},
                               {3, "junk", kMessages, 2, true}}))
        .view_rel(kRecent, recent_messages, 'v', {"id", "author"}, {},
                  view_action({{1, "id", kMessagesView, 1}, {2, "author", kMessagesView, 2}}));
    c.computed({"api", "user_messages"}, users, messages, false)
        .computed({"api", "first_friend"}, users, users, true)
        .computed({"api", "owners"}, pets, owners, true);
    c.function({"api", "lookup"}, 1, {{"id", "integer"}}, "text", false, std::nullopt, 's')
        .function({"api", "lookup"}, 2, {{"name", "text"}}, "text", false, std::nullopt, 's')
        .function({"api", "unresolvable"}, 3, {{"a", "text"}})
        .function({"api", "unresolvable"}, 4, {{"a", "integer"}})
        .function({"api", "with_defaults"}, 5,
                  {{"a", "integer"}, {"b", "integer", true}, {"c", "text", true}})
        .function({"api", "only_defaults"}, 6, {{"x", "integer", true}})
        .function({"api", "echo_json"}, 7, {{"", "json"}}, "json")
        .function({"api", "echo_text"}, 8, {{"", "text"}}, "text")
        .function({"api", "no_args"}, 9, {}, "void")
        .function({"api", "take_body"}, 10, {{"payload", "jsonb"}})
        .function({"api", "user_rows"}, 11, {{"name", "text"}}, "", true, users)
        .function({"api", "both_ways"}, 12, {})
        .function({"api", "both_ways"}, 13, {{"", "text", true}});
    c.role("anon", {{"statement_timeout", "3s"}});
    return c.json();
}

std::shared_ptr<const rest::schema_cache> api_cache() {
    return rest::decode(api_catalog(), {"api"});
}

template <class F>
rest::api_error error_of(F&& f) {
    try {
        f();
    } catch (const rest::api_error& e) {
        return e;
    }
    FAIL("no api_error was thrown");
    throw std::logic_error("unreachable");
}

rest::relationship rel(const rest::schema_cache& sc, const qualified_name& from,
                       std::string_view target, std::string_view hint = "") {
    return sc.find_relationship(from, target, hint);
}

}  // namespace

// ---- decode ------------------------------------------------------------------------------------

TEST_CASE("decode reads tables, columns, keys, functions and role settings", "[rest]") {
    auto sc = api_cache();
    CHECK(sc->schemas == std::vector<std::string>{"api"});
    CHECK(sc->server_version == "150020");
    CHECK(sc->loaded_at_ms > 0);
    const auto& u = sc->find_table(users);
    CHECK(u.kind == 'r');
    CHECK_FALSE(u.is_view());
    CHECK(u.insertable);
    CHECK(u.primary_key == std::vector<std::string>{"username"});
    REQUIRE(u.columns.size() == 4);
    REQUIRE(u.find("status") != nullptr);
    CHECK(u.find("status")->position == 2);
    CHECK(u.find("status")->category == 'S');
    CHECK_FALSE(u.find("username")->nullable);
    CHECK(u.find("nope") == nullptr);
    // what an insert may leave out, and what it may not write at all
    CHECK_FALSE(u.find("username")->has_default);
    CHECK(u.find("status")->has_default);
    CHECK(u.find("status")->default_expr == "'active'::text");
    CHECK_FALSE(u.find("status")->generated);
    CHECK(u.find("serial")->has_default);
    CHECK(u.find("serial")->generated);
    CHECK(u.find("shout")->has_default);
    CHECK(u.find("shout")->generated);
    CHECK(u.find("shout")->default_expr.empty());
    CHECK(sc->find_table(users_view).is_view());
    // every key relationship's foreign key, exposed or not
    CHECK(sc->foreign_keys.size() == 16);
    REQUIRE(sc->functions.count({"api", "lookup"}) == 1);
    CHECK(sc->functions.at({"api", "lookup"}).size() == 2);
    const auto& rows = sc->functions.at({"api", "user_rows"}).front();
    CHECK(rows.returns_set);
    CHECK(rows.returns_composite);
    REQUIRE(rows.returns_table.has_value());
    CHECK(*rows.returns_table == users);
    CHECK(rows.return_type_name == users);
    CHECK(sc->functions.at({"api", "no_args"}).front().returns_void);
    CHECK(sc->functions.at({"api", "lookup"}).front().volatility == 's');
    REQUIRE(sc->roles.count("anon") == 1);
    CHECK(sc->roles.at("anon").settings ==
          std::vector<std::pair<std::string, std::string>>{{"statement_timeout", "3s"}});
}

TEST_CASE("overloads are kept in PostgREST's order: fewer parameters first", "[rest]") {
    auto sc = api_cache();
    const auto& both = sc->functions.at({"api", "both_ways"});
    REQUIRE(both.size() == 2);
    CHECK(both[0].params.empty());
    CHECK(both[1].params.size() == 1);
    const auto& un = sc->functions.at({"api", "unresolvable"});
    CHECK(un[0].params[0].type == "integer");  // by parameter type when counts tie
    CHECK(un[1].params[0].type == "text");
}

TEST_CASE("a view inherits its base table's primary key, through views of views", "[rest]") {
    auto sc = api_cache();
    CHECK(sc->find_table(users_view).primary_key == std::vector<std::string>{"username"});
    CHECK(sc->find_table(messages_view).primary_key == std::vector<std::string>{"id"});
    CHECK(sc->find_table(recent_messages).primary_key == std::vector<std::string>{"id"});
}

TEST_CASE("decode refuses a malformed catalog document with an error, never a crash", "[rest]") {
    const std::string good = api_catalog();
    CHECK_NOTHROW(rest::decode(good, {"api"}));
    CHECK_THROWS_AS(rest::decode("", {"api"}), awp::core::error);
    CHECK_THROWS_AS(rest::decode("[]", {"api"}), awp::core::error);
    CHECK_THROWS_AS(rest::decode("{\"tables\":[]}", {"api"}), awp::core::error);
    CHECK_THROWS_WITH(rest::decode(R"({"server_version_num":150020})", {"api"}),
                      Catch::Contains("server_version_num is not a string"));
    auto broken = [&](const std::string& from, const std::string& to) {
        auto s = good;
        const auto at = s.find(from);
        REQUIRE(at != std::string::npos);
        s.replace(at, from.size(), to);
        return s;
    };
    CHECK_THROWS_WITH(rest::decode(broken(R"("pk":["username"])", R"("pk":"username")"), {"api"}),
                      Catch::Contains("pk is not an array"));
    CHECK_THROWS_WITH(rest::decode(broken(R"("kind":"r")", R"("kind":"rr")"), {"api"}),
                      Catch::Contains("kind is not one character"));
    CHECK_THROWS_WITH(rest::decode(broken(R"("one_to_one":false)", R"("one_to_one":0)"), {"api"}),
                      Catch::Contains("one_to_one is not a boolean"));
    CHECK_THROWS_WITH(rest::decode(broken(R"("columns":[["first_user","username"]])",
                                          R"("columns":[["first_user"]])"),
                                   {"api"}),
                      Catch::Contains("columns is not a list of pairs"));
    CHECK_THROWS_WITH(rest::decode(broken(R"("name":"users",)", R"("nom":"users",)"), {"api"}),
                      Catch::Contains("name is not present"));
    // A query tree with a bracket that does not close what it should, or cut short.
    CHECK_THROWS_WITH(
        rest::decode(broken(":resno 1 :resname username", ":resno 1 ) :resname x"), {"api"}),
        Catch::Contains("view query tree: unbalanced ')'"));
    CHECK_THROWS_WITH(
        rest::decode(broken(":resjunk false} ) :override 0 :onConflict <> :returningList <>})",
                            ":resjunk false} "),
                     {"api"}),
        Catch::Contains("view query tree: no complete target list"));
    CHECK_THROWS_WITH(
        rest::decode(broken(":resorigcol 1 :resjunk false}", ":resorigcol 1x}"), {"api"}),
        Catch::Contains("view query tree: expected a number"));
}

TEST_CASE("a view query tree nested absurdly deep is refused, not walked", "[rest]") {
    std::string deep = "({QUERY :targetList ({TARGETENTRY :expr ";
    for (int i = 0; i < 200000; ++i) deep += "{A :b ";
    auto doc = std::string(R"({"server_version_num":"1","tables":[],"fks":[],"view_rels":[)") +
               R"({"oid":1,"schema":"api","name":"v","kind":"v","columns":[],"keys":[],)" +
               R"("action":")" + deep + R"("}],"functions":[],"computed":[],"roles":[]})";
    CHECK_THROWS_WITH(rest::decode(doc, {"api"}), Catch::Contains("nested too deep"));
}

// ---- relationships
// -------------------------------------------------------------------------------

TEST_CASE("embeds follow foreign keys both ways: many-to-one is an object, one-to-many an array",
          "[rest]") {
    auto sc = api_cache();
    auto m2o = rel(*sc, messages, "users");
    CHECK(m2o.card == cardinality::many_to_one);
    CHECK(m2o.is_to_one());
    CHECK(m2o.constraint == "messages_username_fkey");
    CHECK(m2o.columns ==
          std::vector<std::pair<std::string, std::string>>{{"username", "username"}});
    auto o2m = rel(*sc, users, "messages");
    CHECK(o2m.card == cardinality::one_to_many);
    CHECK_FALSE(o2m.is_to_one());
    CHECK(o2m.columns ==
          std::vector<std::pair<std::string, std::string>>{{"username", "username"}});
    CHECK(o2m.table == users);
    CHECK(o2m.foreign_table == messages);
}

TEST_CASE(
    "a composite tenant key embeds by table, by constraint and by its column beside tenant_id",
    "[rest]") {
    auto sc = api_cache();
    auto r = rel(*sc, tasks, "agents");
    CHECK(r.card == cardinality::many_to_one);
    CHECK(r.constraint == "tasks_tenant_id_assignee_agent_id_fkey");
    CHECK(r.columns == std::vector<std::pair<std::string, std::string>>{
                           {"tenant_id", "tenant_id"}, {"assignee_agent_id", "id"}});
    CHECK(rel(*sc, tasks, "agents", "tasks_tenant_id_assignee_agent_id_fkey").constraint ==
          "tasks_tenant_id_assignee_agent_id_fkey");
    CHECK(rel(*sc, tasks, "tasks_tenant_id_assignee_agent_id_fkey").foreign_table == agents);
    CHECK(rel(*sc, agents, "tasks").card == cardinality::one_to_many);
    // PostgREST matches a column (as the hint, or as the target) only on a single-column key;
    // a (tenant_id, x) key is named by x, as a UI written for single-column keys names it
    // (`knowledge_items:knowledge_item_id(...)`).
    CHECK(rel(*sc, tasks, "agents", "assignee_agent_id").constraint ==
          "tasks_tenant_id_assignee_agent_id_fkey");
    CHECK(rel(*sc, tasks, "assignee_agent_id").foreign_table == agents);
    // tenant_id itself names no key: it is in every one.
    auto e = error_of([&] { (void)rel(*sc, tasks, "agents", "tenant_id"); });
    CHECK(e.status() == 400);
    CHECK(e.code() == "PGRST200");
    CHECK(e.message() ==
          "Could not find a relationship between 'tasks' and 'agents' in the "
          "schema cache");
    CHECK(e.details() ==
          "Searched for a foreign key relationship between 'tasks' and 'agents' using the hint "
          "'tenant_id' in the schema 'api', but no matches were found.");
    CHECK(e.hint().empty());
    // the name the UI writes does not exist until the constraint carries it
    CHECK(error_of([&] {
              (void)rel(*sc, tasks, "agents", "tasks_assignee_agent_id_fkey");
          }).code() == "PGRST200");
}

TEST_CASE("several keys to one table are PGRST201 with PostgREST's details and hint", "[rest]") {
    auto sc = api_cache();
    auto e = error_of([&] { (void)rel(*sc, best_friends, "users"); });
    CHECK(e.status() == 300);
    CHECK(e.code() == "PGRST201");
    CHECK(e.message() ==
          "Could not embed because more than one relationship was found for 'best_friends' and "
          "'users'");
    CHECK(e.details_json ==
          R"j([{"cardinality":"many-to-one","embedding":"best_friends with users",)j"
          R"j("relationship":"best_friends_first_user_fkey using best_friends(first_user) and )j"
          R"j(users(username)"},{"cardinality":"many-to-one","embedding":"best_friends with )j"
          R"j(users","relationship":"best_friends_second_user_fkey using )j"
          R"j(best_friends(second_user) and users(username)"}])j");
    CHECK(e.hint() ==
          "Try changing 'users' to one of the following: 'users!best_friends_first_user_fkey', "
          "'users!best_friends_second_user_fkey'. Find the desired relationship in the 'details' "
          "key.");
    CHECK(e.body().find(R"("details":[{"cardinality")") != std::string::npos);
    // the hint settles it: by constraint, by this side's column, by the other side's column
    CHECK(rel(*sc, best_friends, "users", "best_friends_second_user_fkey").columns[0].first ==
          "second_user");
    CHECK(rel(*sc, best_friends, "users", "first_user").constraint ==
          "best_friends_first_user_fkey");
    CHECK(rel(*sc, users, "best_friends", "second_user").constraint ==
          "best_friends_second_user_fkey");
    // ... or the target itself names the key or its column
    CHECK(rel(*sc, users, "best_friends_first_user_fkey").card == cardinality::one_to_many);
    CHECK(rel(*sc, best_friends, "second_user").constraint == "best_friends_second_user_fkey");
    auto back = error_of([&] { (void)rel(*sc, users, "best_friends"); });
    CHECK(back.details_json.find(
              R"j("cardinality":"one-to-many","embedding":"users with best_friends",)j"
              R"j("relationship":"best_friends_first_user_fkey using users(username) and )j"
              R"j(best_friends(first_user)")j") != std::string::npos);
}

TEST_CASE("a key over unique columns is one-to-one, an object from either side", "[rest]") {
    auto sc = api_cache();
    auto child = rel(*sc, profiles, "users");
    CHECK(child.card == cardinality::one_to_one);
    CHECK_FALSE(child.o2o_parent);
    CHECK(child.is_to_one());
    auto parent = rel(*sc, users, "profiles");
    CHECK(parent.card == cardinality::one_to_one);
    CHECK(parent.o2o_parent);
    CHECK(parent.is_to_one());
}

TEST_CASE("many-to-many goes through a junction whose keys are in its primary key", "[rest]") {
    auto sc = api_cache();
    auto r = rel(*sc, products, "categories");
    CHECK(r.card == cardinality::many_to_many);
    CHECK_FALSE(r.is_to_one());
    CHECK(r.junction == product_categories);
    CHECK(r.junction_constraint_source == "product_categories_product_id_fkey");
    CHECK(r.junction_constraint_target == "product_categories_category_id_fkey");
    CHECK(r.junction_source_columns ==
          std::vector<std::pair<std::string, std::string>>{{"id", "product_id"}});
    CHECK(r.junction_target_columns ==
          std::vector<std::pair<std::string, std::string>>{{"category_id", "id"}});
    CHECK(rel(*sc, categories, "products", "product_categories").junction == product_categories);
    // the junction itself embeds both sides many-to-one
    CHECK(rel(*sc, product_categories, "products").card == cardinality::many_to_one);
    // a junction outside the exposed schemas joins nothing
    CHECK(error_of([&] { (void)rel(*sc, users, "tags"); }).code() == "PGRST200");
    for (const auto& r2 : sc->relationships(users)) CHECK(r2.foreign_table.schema == "api");
}

TEST_CASE("a table with two keys to itself: its name is the children, a column the parent",
          "[rest]") {
    auto sc = api_cache();
    auto e = error_of([&] { (void)rel(*sc, lab, "lab"); });
    CHECK(e.code() == "PGRST201");
    CHECK(e.details_json ==
          R"j([{"cardinality":"one-to-many","embedding":"lab with lab","relationship":)j"
          R"j("lab_main_fkey using lab(id) and lab(main)"},{"cardinality":"one-to-many",)j"
          R"j("embedding":"lab with lab","relationship":"lab_parent_fkey using lab(id) and )j"
          R"j(lab(parent)"}])j");
    CHECK(e.hint() ==
          "Try changing 'lab' to one of the following: 'lab!lab_main_fkey', "
          "'lab!lab_parent_fkey'. Find the desired relationship in the 'details' key.");
    auto parent = rel(*sc, lab, "parent");
    CHECK(parent.card == cardinality::many_to_one);
    CHECK(parent.is_self);
    CHECK(parent.constraint == "lab_parent_fkey");
    auto children = rel(*sc, lab, "lab", "main");
    CHECK(children.card == cardinality::one_to_many);
    CHECK(children.constraint == "lab_main_fkey");
    // PostgREST resolves a self reference by its referencing column only, not its constraint
    auto by_constraint = error_of([&] { (void)rel(*sc, lab, "lab", "lab_parent_fkey"); });
    CHECK(by_constraint.code() == "PGRST200");
    CHECK(by_constraint.hint().empty());  // 'lab' is right: no closer name to suggest
    // nor by the referenced column: that would be the parents, and a hint means children
    CHECK(error_of([&] { (void)rel(*sc, lab, "lab", "id"); }).code() == "PGRST200");
}

TEST_CASE("views embed through their base tables' keys, views of views too", "[rest]") {
    auto sc = api_cache();
    auto v2t = rel(*sc, messages_view, "users");
    CHECK(v2t.card == cardinality::many_to_one);
    CHECK(v2t.constraint == "messages_username_fkey");
    CHECK(v2t.columns == std::vector<std::pair<std::string, std::string>>{{"author", "username"}});
    CHECK(v2t.table_is_view);
    auto t2v = rel(*sc, messages, "users_view");
    CHECK(t2v.card == cardinality::many_to_one);
    CHECK(t2v.foreign_table_is_view);
    auto v2v = rel(*sc, messages_view, "users_view");
    CHECK(v2v.columns == std::vector<std::pair<std::string, std::string>>{{"author", "username"}});
    CHECK(rel(*sc, users_view, "messages_view").card == cardinality::one_to_many);
    auto deep = rel(*sc, recent_messages, "users");
    CHECK(deep.columns == std::vector<std::pair<std::string, std::string>>{{"author", "username"}});
    CHECK(rel(*sc, users, "recent_messages").card == cardinality::one_to_many);
    // a constraint as the target finds the table only (messages), never the views that show
    // the same key (messages_view, recent_messages)
    auto by_fk = rel(*sc, users_view, "messages_username_fkey");
    CHECK(by_fk.foreign_table == messages);
    CHECK(by_fk.card == cardinality::one_to_many);
}

TEST_CASE("computed relationships embed by function name and replace a same-named table's keys",
          "[rest]") {
    auto sc = api_cache();
    auto many = rel(*sc, users, "user_messages");
    CHECK(many.card == cardinality::computed);
    CHECK(many.function == qualified_name{"api", "user_messages"});
    CHECK(many.foreign_table == messages);
    CHECK_FALSE(many.is_to_one());
    auto one = rel(*sc, users, "first_friend");
    CHECK(one.is_to_one());
    CHECK(one.is_self);
    // pets → owners: the function api.owners(pets) stands for every key relationship to owners
    auto owner = rel(*sc, pets, "owners");
    CHECK(owner.card == cardinality::computed);
    CHECK(error_of([&] { (void)rel(*sc, pets, "owner_id"); }).code() == "PGRST200");
    // a column of `from` holding a key, when nothing overrides it
    auto client = rel(*sc, projects, "client_id");
    CHECK(client.foreign_table == clients);
    CHECK(client.card == cardinality::many_to_one);
}

TEST_CASE("PGRST200's hint suggests a closer origin or a closer target", "[rest]") {
    auto sc = api_cache();
    auto target = error_of([&] { (void)rel(*sc, users, "mesages"); });
    CHECK(target.details() ==
          "Searched for a foreign key relationship between 'users' and 'mesages' in the schema "
          "'api', but no matches were found.");
    CHECK(target.hint() == "Perhaps you meant 'messages' instead of 'mesages'.");
    auto origin = error_of([&] { (void)rel(*sc, {"api", "taks"}, "agents"); });
    CHECK(origin.hint() == "Perhaps you meant 'tasks' instead of 'taks'.");
    auto nothing = error_of([&] { (void)rel(*sc, users, "zzzzzzzz"); });
    CHECK(nothing.hint().empty());
    CHECK(nothing.body() ==
          R"({"code":"PGRST200","details":"Searched for a foreign key relationship between )"
          R"('users' and 'zzzzzzzz' in the schema 'api', but no matches were found.","hint":null,)"
          R"("message":"Could not find a relationship between 'users' and 'zzzzzzzz' in the )"
          R"(schema cache"})");
    // a table outside the exposed schemas has no relationships here
    CHECK(error_of([&] { (void)rel(*sc, users, "secrets"); }).code() == "PGRST200");
}

// ---- tables ----------------------------------------------------------------------------------

TEST_CASE("an unknown table is PGRST205 with the closest table as a hint", "[rest]") {
    auto sc = api_cache();
    CHECK(sc->try_table({"api", "userz"}) == nullptr);
    CHECK(sc->try_table(users) == &sc->find_table(users));
    auto e = error_of([&] { (void)sc->find_table({"api", "userz"}); });
    CHECK(e.status() == 404);
    CHECK(e.code() == "PGRST205");
    CHECK(e.message() == "Could not find the table 'api.userz' in the schema cache");
    CHECK(e.hint() == "Perhaps you meant the table 'api.users'");
    CHECK(e.details().empty());
    // far from every name: no hint; another schema's table is not this schema's
    CHECK(error_of([&] { (void)sc->find_table({"api", "qqqqqq"}); }).hint().empty());
    CHECK(error_of([&] { (void)sc->find_table(secrets); }).hint().empty());
}

// ---- functions ---------------------------------------------------------------------------------

namespace {
rest::schema_cache::call_match call(const rest::schema_cache& sc, const std::string& name,
                                    std::vector<std::string> args, bool get = false,
                                    rest::media content = rest::media::json,
                                    bool single_object = false) {
    return sc.find_function({"api", name}, args, true, single_object, get, content);
}
}  // namespace

TEST_CASE("an overloaded function is chosen by its named arguments", "[rest]") {
    auto sc = api_cache();
    CHECK(call(*sc, "lookup", {"id"}).fn->oid == 1);
    CHECK(call(*sc, "lookup", {"name"}).fn->oid == 2);
    CHECK(call(*sc, "lookup", {"name"}, true).fn->oid == 2);  // GET with query arguments
    CHECK_FALSE(call(*sc, "lookup", {"id"}).single_unnamed);
    // parameters with defaults may be left out, none unknown may be added
    CHECK(call(*sc, "with_defaults", {"a"}).fn->oid == 5);
    CHECK(call(*sc, "with_defaults", {"c", "a"}).fn->oid == 5);
    CHECK(call(*sc, "only_defaults", {}).fn->oid == 6);
    CHECK(call(*sc, "only_defaults", {"x"}).fn->oid == 6);
    CHECK(call(*sc, "no_args", {}).fn->oid == 9);
    auto missing = error_of([&] { (void)call(*sc, "with_defaults", {"b"}); });
    CHECK(missing.code() == "PGRST202");
    auto extra = error_of([&] { (void)call(*sc, "with_defaults", {"z", "a"}); });
    CHECK(extra.status() == 404);
    CHECK(extra.message() ==
          "Could not find the function api.with_defaults(a, z) in the schema "
          "cache");
    CHECK(extra.details() ==
          "Searched for the function api.with_defaults with parameters a, z or with a single "
          "unnamed json/jsonb parameter, but no matches were found in the schema cache.");
    CHECK(extra.hint() == "Perhaps you meant to call the function api.with_defaults(a, b, c)");
}

TEST_CASE("PGRST202 names what was searched for and suggests the closest function", "[rest]") {
    auto sc = api_cache();
    auto typo = error_of([&] { (void)call(*sc, "lokup", {"id"}); });
    CHECK(typo.code() == "PGRST202");
    CHECK(typo.message() == "Could not find the function api.lokup(id) in the schema cache");
    CHECK(typo.hint() == "Perhaps you meant to call the function api.lookup");
    auto none = error_of([&] { (void)call(*sc, "lookup", {}); });
    CHECK(none.message() ==
          "Could not find the function api.lookup without parameters in the schema cache");
    CHECK(none.details() ==
          "Searched for the function api.lookup without parameters or with a single unnamed "
          "json/jsonb parameter, but no matches were found in the schema cache.");
    auto get = error_of([&] { (void)call(*sc, "lookup", {"nam"}, true); });
    CHECK(get.details() ==
          "Searched for the function api.lookup with parameter nam, but no matches were found in "
          "the schema cache.");
    CHECK(get.hint() == "Perhaps you meant to call the function api.lookup(name)");
    auto unknown = error_of([&] { (void)call(*sc, "qqqqqqqq", {}); });
    CHECK(unknown.hint().empty());
    CHECK(unknown.body().find(R"("hint":null)") != std::string::npos);
}

TEST_CASE("two overloads that both fit are PGRST203, listed as PostgREST lists them", "[rest]") {
    auto sc = api_cache();
    auto e = error_of([&] { (void)call(*sc, "unresolvable", {"a"}); });
    CHECK(e.status() == 300);
    CHECK(e.code() == "PGRST203");
    CHECK(e.message() ==
          "Could not choose the best candidate function between: api.unresolvable(a => integer), "
          "api.unresolvable(a => text)");
    CHECK(e.hint() ==
          "Try renaming the parameters or the function itself in the database so function "
          "overloading can be resolved");
    CHECK(e.details().empty());
    auto unnamed = error_of([&] { (void)call(*sc, "both_ways", {}); });
    CHECK(unnamed.message() ==
          "Could not choose the best candidate function between: api.both_ways(), "
          "api.both_ways( => text)");
}

TEST_CASE("one unnamed json, text, xml or bytea parameter takes the whole POST body", "[rest]") {
    auto sc = api_cache();
    auto json = call(*sc, "echo_json", {"anything", "at_all"});
    CHECK(json.fn->oid == 7);
    CHECK(json.single_unnamed);
    auto text = call(*sc, "echo_text", {}, false, rest::media::text);
    CHECK(text.fn->oid == 8);
    CHECK(text.single_unnamed);
    // not on GET, and not for a body of another type
    CHECK(error_of([&] { (void)call(*sc, "echo_json", {"a"}, true); }).code() == "PGRST202");
    auto wrong = error_of([&] { (void)call(*sc, "echo_text", {"a"}); });
    CHECK(wrong.code() == "PGRST202");
    // a text body looks for a text parameter only: PostgREST's message then names no
    // parameters and gives no hint
    auto no_text = error_of([&] { (void)call(*sc, "no_args", {}, false, rest::media::text); });
    CHECK(no_text.message() == "Could not find the function api.no_args in the schema cache");
    CHECK(no_text.details() ==
          "Searched for the function api.no_args with a single unnamed text parameter, but no "
          "matches were found in the schema cache.");
    CHECK(no_text.hint().empty());
    auto form = error_of([&] { (void)call(*sc, "lookup", {"x"}, false, rest::media::other); });
    CHECK(form.details() ==
          "Searched for the function api.lookup with parameter x, but no matches were found in "
          "the schema cache.");
}

TEST_CASE("Prefer: params=single-object passes the body to a lone json parameter", "[rest]") {
    auto sc = api_cache();
    auto m = call(*sc, "take_body", {"a", "b"}, false, rest::media::json, true);
    CHECK(m.fn->oid == 10);
    CHECK(m.single_unnamed);
    // without it the keys must be the parameter's name
    CHECK(error_of([&] { (void)call(*sc, "take_body", {"a", "b"}); }).code() == "PGRST202");
    CHECK_FALSE(call(*sc, "take_body", {"payload"}).single_unnamed);
    // no lone json parameter: resolution as without the preference
    CHECK(call(*sc, "lookup", {"id"}, false, rest::media::json, true).fn->oid == 1);
}

}  // namespace rest_schema_test
