// A view's target list origins from its pg_node_tree text (node_tree.hpp). The text is the one
// nodeToString() writes: `{NODE :field value ...}` nodes, `(...)` lists, other tokens separated
// by white space with '\' escaping a following special character (read.c's pg_strtok rules).
// Read with an explicit stack, so a deeply nested expression cannot exhaust the C++ stack.
#include "node_tree.hpp"

#include <charconv>
#include <string>

#include "awp/core/error.hpp"

namespace awp::rest::detail {

namespace {

class tokenizer {
public:
    explicit tokenizer(std::string_view s) : s_(s) {}
    /// The next token ("" at the end).
    std::string_view next() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) {
            ++pos_;
        }
        if (pos_ >= s_.size()) return {};
        const std::size_t start = pos_;
        if (special(s_[pos_])) {
            ++pos_;
        } else {
            while (pos_ < s_.size() && s_[pos_] != ' ' && s_[pos_] != '\n' && s_[pos_] != '\t' &&
                   !special(s_[pos_])) {
                pos_ += (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ? 2 : 1;
            }
        }
        return s_.substr(start, pos_ - start);
    }

private:
    static bool special(char c) { return c == '(' || c == ')' || c == '{' || c == '}'; }
    std::string_view s_;
    std::size_t pos_ = 0;
};

template <class T>
T number(std::string_view token) {
    T v{};
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
    if (ec != std::errc() || end != token.data() + token.size()) {
        throw core::error("view query tree: expected a number, got '" + std::string(token) + "'");
    }
    return v;
}

struct frame {
    bool is_node = false;
    std::string_view node_type;  // for nodes
    std::string_view field;      // the field whose value is being read (nodes)
    std::size_t items = 0;       // lists: items begun so far
};

// Nothing Postgres writes nests this deep; a text that does is not one we should walk.
constexpr std::size_t kMaxDepth = 100000;

}  // namespace

std::vector<target_origin> view_target_origins(std::string_view ev_action) {
    tokenizer tok(ev_action);
    std::vector<frame> stack;
    std::vector<target_origin> out;
    target_origin entry;
    bool junk = false;
    bool done = false;
    // The target entries sit at: list (the rule's actions) → its first QUERY → :targetList →
    // list → TARGETENTRY. `in_targets` says whether the stack is on that path right now.
    auto in_targets = [&] {
        return stack.size() >= 3 && !stack[0].is_node && stack[0].items == 1 && stack[1].is_node &&
               stack[1].node_type == "QUERY" && stack[1].field == ":targetList" &&
               !stack[2].is_node;
    };
    for (std::string_view t = tok.next(); !t.empty() && !done; t = tok.next()) {
        if (t == "{" || t == "(") {
            if (stack.size() >= kMaxDepth) throw core::error("view query tree: nested too deep");
            if (!stack.empty() && !stack.back().is_node) ++stack.back().items;
            frame f;
            f.is_node = t == "{";
            if (f.is_node) {
                f.node_type = tok.next();
                if (f.node_type.empty()) throw core::error("view query tree: truncated");
            }
            stack.push_back(f);
            if (stack.size() == 4 && in_targets()) {
                if (stack[3].node_type != "TARGETENTRY") {
                    throw core::error("view query tree: a target list item is not a TARGETENTRY");
                }
                entry = {};
                junk = false;
            }
        } else if (t == "}" || t == ")") {
            if (stack.empty() || stack.back().is_node != (t == "}")) {
                throw core::error("view query tree: unbalanced '" + std::string(t) + "'");
            }
            if (stack.size() == 4 && in_targets() && !junk) out.push_back(entry);
            // The first query's target list is all we need.
            if (stack.size() == 3 && in_targets()) done = true;
            stack.pop_back();
        } else if (!stack.empty() && stack.back().is_node && t.front() == ':') {
            stack.back().field = t;
        } else if (stack.size() == 4 && in_targets()) {
            const auto field = stack[3].field;
            if (field == ":resno") {
                entry.resno = number<int>(t);
            } else if (field == ":resorigtbl") {
                entry.origin_table = number<std::uint32_t>(t);
            } else if (field == ":resorigcol") {
                entry.origin_column = number<int>(t);
            } else if (field == ":resjunk") {
                junk = t == "true";
            }
        } else if (stack.empty()) {
            throw core::error("view query tree: a token outside any node");
        }
    }
    if (!done && !(stack.empty() && out.empty())) {
        throw core::error("view query tree: no complete target list");
    }
    return out;
}

}  // namespace awp::rest::detail
