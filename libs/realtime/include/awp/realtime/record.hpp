// A change as the postgres_changes event carries it to realtime-js: the `data` object
// {schema, table, commit_timestamp, type, columns, record, old_record, errors} with values typed
// as the platform types them (to_jsonb's JSON: numbers, booleans, json, arrays; timestamps in
// ISO 8601), which realtime-js's convertChangeData then leaves as they are.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "awp/core/json.hpp"
#include "awp/realtime/change.hpp"

namespace awp::realtime {

/// One column's text (as Postgres prints it) as JSON, for its type name ("_int4" is an array
/// of int4): appended to `j`.
void write_value(core::json::writer& j, std::string_view type, std::string_view text);

/// The event's `data`. INSERT: record; UPDATE: record and old_record (the identity columns:
/// the old key when it changed, else the new row's key columns); DELETE: old_record of the
/// identity columns only. `errors` is null. `primary_key`, when not empty, narrows old_record
/// to those columns (a table of REPLICA IDENTITY FULL sends every old column: the subscriber
/// gets the key, nothing more).
/// `columns`, when given, are the only columns the event may carry (those the subscriber's role
/// may select): the others are left out of `columns`, `record` and `old_record`.
[[nodiscard]] std::string change_data(const change& c,
                                      const std::vector<std::string>& primary_key = {},
                                      const std::set<std::string, std::less<>>* columns = nullptr);

/// A postgres_changes push's payload: {"ids": [...], "data": <data_json>}.
[[nodiscard]] std::string change_payload(const std::vector<std::uint64_t>& ids,
                                         std::string_view data_json);

}  // namespace awp::realtime
