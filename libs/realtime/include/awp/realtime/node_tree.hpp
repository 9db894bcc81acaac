// PostgreSQL's pg_node_tree text (what pg_policy.polqual, pg_proc.prosqlbody and pg_rewrite hold:
// nodeToString's output) read into a plain tree: nodes `{TAG :field value ...}`, lists `(...)`,
// tokens, `<>` (NULL) and datums `n [ b b ... ]`. Nothing here knows what a node means: the claims
// analysis (claims.hpp) walks the tree. Bounded (bytes, nesting) and fuzzed
// (fuzz/realtime_node_tree.cpp): the text comes from the catalog, which an operator writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "awp/core/error.hpp"

namespace awp::realtime::node_tree {

/// Text that is not a node tree (or one above the limits): what and where.
class parse_error : public core::error {
public:
    parse_error(const std::string& what, std::size_t offset)
        : core::error(what + " (at byte " + std::to_string(offset) + ")") {}
};

struct limits {
    std::size_t max_bytes = 4 * 1024 * 1024;
    unsigned max_depth = 512;  ///< nodes and lists inside one another
};

/// One value of the tree.
struct value {
    enum class kind : std::uint8_t { null, token, list, node, datum };
    kind what = kind::null;
    /// token: the token with its backslashes removed; node: the tag; datum: the bytes.
    std::string text;
    /// list: the elements; node: the fields' values, in the order of `names`.
    std::vector<value> items;
    std::vector<std::string> names;  ///< node: the field names (without ':')

    [[nodiscard]] bool is_null() const noexcept { return what == kind::null; }
    [[nodiscard]] bool is_node() const noexcept { return what == kind::node; }
    [[nodiscard]] bool is_node(std::string_view tag) const noexcept {
        return what == kind::node && text == tag;
    }
    [[nodiscard]] bool is_list() const noexcept { return what == kind::list; }
    /// A node's field; nullptr when the node has none of that name (or this is not a node).
    [[nodiscard]] const value* field(std::string_view name) const noexcept;
    /// A node's field as an integer (oids, enums, attribute numbers); nullopt when absent or
    /// not a number.
    [[nodiscard]] std::optional<std::int64_t> number(std::string_view name) const;
    /// A node's field as a boolean ("true"/"false").
    [[nodiscard]] std::optional<bool> boolean(std::string_view name) const;
};

/// Parses one tree. Throws parse_error.
[[nodiscard]] value parse(std::string_view text, const limits& l = {});

/// A CONST node's value as text when its type is text, varchar, name, bpchar or unknown and it
/// is not null (the datum decoded from its varlena or fixed-length bytes); nullopt otherwise.
[[nodiscard]] std::optional<std::string> const_text(const value& c);
/// A CONST node's value as an integer when its type is int2, int4, int8 or oid.
[[nodiscard]] std::optional<std::int64_t> const_integer(const value& c);
/// A CONST node's value as a boolean.
[[nodiscard]] std::optional<bool> const_bool(const value& c);
/// A CONST node of type text[] (one dimension, no NULLs): its elements.
[[nodiscard]] std::optional<std::vector<std::string>> const_text_array(const value& c);

}  // namespace awp::realtime::node_tree
