// Inbox producers: each trigger fires once for its event and dedups a repeat of the same event.
#include "schema_helpers.hpp"

namespace schema_producers_test {

using namespace awp::schema_test;
using awp::test::scoped_database;

namespace {

long items(pg::connection& c, const std::string& agent, const std::string& type) {
    return count(c,
                 "SELECT count(*) FROM agent_inbox_items WHERE agent_id = $1 AND event_type = "
                 "$2::inbox_event_type",
                 {agent, type});
}

}  // namespace

TEST_CASE("assignment and reassignment to an agent create one item each", "[schema][producers]") {
    scoped_database db;
    auto admin = db.admin();
    auto gw = default_gateway(admin);
    auto alice = new_agent(admin, kDefaultTenant, "alice", gw);
    auto bob = new_agent(admin, kDefaultTenant, "bob", gw);
    auto api = db.api();
    awp::test::as_user(api, kDefaultTenant, "7d1c0a52-0000-4000-8000-000000000001");

    auto task = one(
        api, "INSERT INTO tasks (title, assignee_agent_id) VALUES ('Fix login', $1) RETURNING id",
        {alice});
    CHECK(items(admin, alice, "task_assignment") == 1);
    CHECK(one(admin,
              "SELECT gateway_id || ' ' || summary FROM agent_inbox_items WHERE agent_id = $1",
              {alice}) == gw + " Task assigned: Fix login");
    api.exec("UPDATE tasks SET title = 'Fix login page' WHERE id = $1", {task});
    CHECK(items(admin, alice, "task_assignment") == 1);
    api.exec("UPDATE tasks SET assignee_agent_id = $2 WHERE id = $1", {task, bob});
    CHECK(items(admin, bob, "task_reassignment") == 1);
    CHECK(one(admin,
              "SELECT payload->>'previous_agent_id' FROM agent_inbox_items WHERE agent_id = $1",
              {bob}) == alice);
    // Bob -> Alice -> Bob inside one transaction: Bob's reassignment dedups.
    api.exec("BEGIN");
    api.exec("UPDATE tasks SET assignee_agent_id = $2 WHERE id = $1", {task, alice});
    api.exec("UPDATE tasks SET assignee_agent_id = $2 WHERE id = $1", {task, bob});
    api.exec("UPDATE tasks SET assignee_agent_id = $2 WHERE id = $1", {task, alice});
    api.exec("UPDATE tasks SET assignee_agent_id = $2 WHERE id = $1", {task, bob});
    api.exec("COMMIT");
    CHECK(items(admin, bob, "task_reassignment") == 2);
    CHECK(items(admin, alice, "task_reassignment") == 1);
    // The user cannot forge inbox items.
    CHECK(sqlstate_of([&] {
              api.exec(
                  "INSERT INTO agent_inbox_items (agent_id, event_type, dedup_key) VALUES ($1, "
                  "'heartbeat', 'x')",
                  {alice});
          }) == "42501");
}

TEST_CASE("a comment mentioning agents wakes each mentioned agent once, not its author",
          "[schema][producers]") {
    scoped_database db;
    auto admin = db.admin();
    auto alice = new_agent(admin, kDefaultTenant, "alice");
    auto bob = new_agent(admin, kDefaultTenant, "bob");
    auto carol = new_agent(admin, kDefaultTenant, "carol");
    auto task = new_task(admin, kDefaultTenant, "Plan launch");
    auto api = db.api();
    awp::test::as_user(api, kDefaultTenant, "7d1c0a52-0000-4000-8000-000000000001");
    auto comment =
        one(api,
            "INSERT INTO task_comments (task_id, body, mentions, actor_type, actor_agent_id) "
            "VALUES ($1, 'Hey @Bob and @carol, can you help? (@alice wrote this)', '{@bob,alice}', "
            "'agent', $2) RETURNING id",
            {task, alice});
    CHECK(items(admin, bob, "task_comment_mention") == 1);
    CHECK(items(admin, carol, "task_comment_mention") == 1);
    CHECK(items(admin, alice, "task_comment_mention") == 0);
    CHECK(one(admin, "SELECT dedup_key FROM agent_inbox_items WHERE agent_id = $1", {bob}) ==
          "comment_mention:" + comment + ":" + bob);
}

TEST_CASE("the last blocker done wakes the blocked task's agent once", "[schema][producers]") {
    scoped_database db;
    auto admin = db.admin();
    auto alice = new_agent(admin, kDefaultTenant, "alice");
    auto blocked = new_task(admin, kDefaultTenant, "Release", alice);
    auto b1 = new_task(admin, kDefaultTenant, "Tests green");
    auto b2 = new_task(admin, kDefaultTenant, "Docs");
    admin.exec(
        "INSERT INTO task_relations (source_task_id, target_task_id, relation_type) VALUES "
        "($1, $2, 'blocked_by'), ($3, $1, 'blocks')",
        {blocked, b1, b2});
    auto api = db.api();
    awp::test::as_user(api, kDefaultTenant, "7d1c0a52-0000-4000-8000-000000000001");
    api.exec("UPDATE tasks SET status = 'done' WHERE id = $1", {b1});
    CHECK(items(admin, alice, "blocker_resolved") == 0);  // Docs still open
    api.exec("UPDATE tasks SET status = 'cancelled' WHERE id = $1", {b2});
    CHECK(items(admin, alice, "blocker_resolved") == 1);
    api.exec("UPDATE tasks SET title = 'Docs!' WHERE id = $1", {b2});
    CHECK(items(admin, alice, "blocker_resolved") == 1);
    CHECK(
        one(admin, "SELECT task_id FROM agent_inbox_items WHERE event_type = 'blocker_resolved'") ==
        blocked);
}

TEST_CASE(
    "deliverable review: reviewer on submit, submitter on revision, all approved completes the "
    "task",
    "[schema][producers]") {
    scoped_database db;
    auto admin = db.admin();
    auto writer = new_agent(admin, kDefaultTenant, "writer");
    auto editor = new_agent(admin, kDefaultTenant, "editor");
    auto task = new_task(admin, kDefaultTenant, "Blog post", writer);
    auto api = db.api();
    awp::test::as_user(api, kDefaultTenant, "7d1c0a52-0000-4000-8000-000000000001");
    auto wp =
        one(api,
            "INSERT INTO work_products (task_id, title, submitted_by_agent_id, reviewer_agent_id) "
            "VALUES ($1, 'Draft', $2, $3) RETURNING id",
            {task, writer, editor});
    api.exec("UPDATE work_products SET status = 'in_review' WHERE id = $1", {wp});
    CHECK(items(admin, editor, "deliverable_review") == 1);
    api.exec(
        "UPDATE work_products SET status = 'revision_requested', review_note = 'shorter' WHERE id "
        "= $1",
        {wp});
    CHECK(items(admin, writer, "deliverable_review") == 1);
    CHECK(one(admin,
              "SELECT payload->>'review_note' FROM agent_inbox_items WHERE agent_id = $1 AND "
              "event_type = 'deliverable_review'",
              {writer}) == "shorter");
    // Second round: new items, keyed by round.
    api.exec("UPDATE work_products SET status = 'in_review' WHERE id = $1", {wp});
    CHECK(items(admin, editor, "deliverable_review") == 2);
    api.exec("UPDATE work_products SET status = 'approved' WHERE id = $1", {wp});
    CHECK(one(admin, "SELECT status FROM tasks WHERE id = $1", {task}) == "done");
    CHECK(items(admin, writer, "deliverable_review") == 1);
}

TEST_CASE("overdue tasks become missed, the agent and its manager get one item each",
          "[schema][producers]") {
    scoped_database db;
    auto admin = db.admin();
    auto boss = new_agent(admin, kDefaultTenant, "boss");
    auto alice = new_agent(admin, kDefaultTenant, "alice", std::nullopt, boss);
    auto late = new_task(admin, kDefaultTenant, "Invoice", alice);
    auto future = new_task(admin, kDefaultTenant, "Later", alice);
    admin.exec("UPDATE tasks SET due_at = now() - interval '1 hour' WHERE id = $1", {late});
    admin.exec("UPDATE tasks SET due_at = now() + interval '1 day' WHERE id = $1", {future});
    admin.exec("DELETE FROM agent_inbox_items");
    auto d = db.daemon();
    CHECK(count(d, "SELECT escalate_overdue_tasks()") == 1);
    CHECK(count(d, "SELECT escalate_overdue_tasks()") == 0);
    CHECK(one(d, "SELECT status FROM tasks WHERE id = $1", {late}) == "missed");
    CHECK(one(d, "SELECT status FROM tasks WHERE id = $1", {future}) == "todo");
    CHECK(count(d,
                "SELECT count(*) FROM agent_inbox_items WHERE agent_id = $1 AND "
                "payload->>'overdue' = 'true'",
                {alice}) == 1);
    CHECK(count(d,
                "SELECT count(*) FROM agent_inbox_items WHERE agent_id = $1 AND "
                "payload->>'escalation' = 'true'",
                {boss}) == 1);
    // Reopened and missed again for the same due time: dedup keeps one item.
    admin.exec("UPDATE tasks SET status = 'todo' WHERE id = $1", {late});
    CHECK(count(d, "SELECT escalate_overdue_tasks()") == 1);
    CHECK(count(d, "SELECT count(*) FROM agent_inbox_items WHERE agent_id = $1", {alice}) == 1);
}

}  // namespace schema_producers_test
