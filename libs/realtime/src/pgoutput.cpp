// pgoutput's message formats read with a bounds-checked cursor: every integer, string and length
// is checked against the bytes left before it is read.
#include "awp/realtime/pgoutput.hpp"

namespace awp::realtime::pgoutput {
namespace {

class reader {
public:
    explicit reader(std::string_view b) : b_(b) {}

    std::size_t at() const noexcept { return at_; }
    std::size_t left() const noexcept { return b_.size() - at_; }

    [[noreturn]] void fail(const std::string& what) const { throw decode_error(what, at_); }

    void need(std::size_t n, const char* what) const {
        if (left() < n) fail(std::string("message ends inside ") + what);
    }
    std::uint8_t u8(const char* what) {
        need(1, what);
        return static_cast<std::uint8_t>(b_[at_++]);
    }
    char byte(const char* what) { return static_cast<char>(u8(what)); }
    std::uint16_t u16(const char* what) { return static_cast<std::uint16_t>(big_endian(2, what)); }
    std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(big_endian(4, what)); }
    std::int32_t i32(const char* what) { return static_cast<std::int32_t>(u32(what)); }
    std::uint64_t u64(const char* what) { return big_endian(8, what); }
    std::int64_t i64(const char* what) { return static_cast<std::int64_t>(u64(what)); }

    /// A NUL-terminated string (names: never empty of their terminator).
    std::string cstring(const char* what) {
        const auto rest = b_.substr(at_);
        const auto end = rest.find('\0');
        if (end == std::string_view::npos) fail(std::string("unterminated ") + what);
        std::string s(rest.substr(0, end));
        at_ += end + 1;
        return s;
    }
    /// n bytes as they are.
    std::string bytes(std::size_t n, const char* what) {
        need(n, what);
        std::string s(b_.substr(at_, n));
        at_ += n;
        return s;
    }
    void done() const {
        if (left() != 0) fail(std::to_string(left()) + " bytes after the end of the message");
    }

private:
    std::uint64_t big_endian(std::size_t n, const char* what) {
        need(n, what);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<std::uint8_t>(b_[at_ + i]);
        at_ += n;
        return v;
    }

    std::string_view b_;
    std::size_t at_ = 0;
};

std::size_t column_count(reader& r) {
    const std::size_t n = r.u16("the column count");
    if (n > kMaxColumns) r.fail("column count " + std::to_string(n) + " is over the limit");
    return n;
}

tuple read_tuple(reader& r) {
    const std::size_t n = column_count(r);
    tuple t;
    t.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        cell c;
        const char kind = r.byte("a column's kind");
        switch (kind) {
            case 'n':
                c.what = cell::kind::null;
                break;
            case 'u':
                c.what = cell::kind::unchanged_toast;
                break;
            case 't':
            case 'b': {
                c.what = kind == 't' ? cell::kind::text : cell::kind::binary;
                const std::int32_t len = r.i32("a value's length");
                if (len < 0) r.fail("negative value length " + std::to_string(len));
                c.value = r.bytes(static_cast<std::size_t>(len), "a value");
                break;
            }
            default:
                r.fail(std::string("unknown column kind 0x") +
                       "0123456789abcdef"[(kind >> 4) & 15] + "0123456789abcdef"[kind & 15]);
        }
        t.push_back(std::move(c));
    }
    return t;
}

relation read_relation(reader& r) {
    relation rel;
    rel.oid = r.u32("the relation oid");
    rel.schema = r.cstring("schema name");
    rel.name = r.cstring("relation name");
    rel.replica_identity = r.byte("the replica identity");
    const std::size_t n = column_count(r);
    rel.columns.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        column_def c;
        const auto flags = r.u8("a column's flags");
        if (flags > 1) r.fail("unknown column flags " + std::to_string(flags));
        c.key = flags == 1;
        c.name = r.cstring("column name");
        c.type_oid = r.u32("a column's type oid");
        c.type_modifier = r.i32("a column's type modifier");
        rel.columns.push_back(std::move(c));
    }
    return rel;
}

/// The 'K' / 'O' / 'N' tag before a tuple.
char tuple_tag(reader& r, std::string_view allowed) {
    const std::size_t at = r.at();
    const char tag = r.byte("a row tag");
    if (allowed.find(tag) == std::string_view::npos) {
        throw decode_error(std::string("unexpected row tag '") +
                               (tag >= 0x20 && tag < 0x7f ? std::string(1, tag) : "?") + "'",
                           at);
    }
    return tag;
}

}  // namespace

message decode(std::string_view bytes) {
    reader r(bytes);
    const char tag = r.byte("the message type");
    message out;
    switch (tag) {
        case 'B': {
            begin m;
            m.final_lsn = r.u64("the final LSN");
            m.commit_time = r.i64("the commit time");
            m.xid = r.u32("the xid");
            out = m;
            break;
        }
        case 'C': {
            commit m;
            m.flags = r.u8("the commit flags");
            m.commit_lsn = r.u64("the commit LSN");
            m.end_lsn = r.u64("the end LSN");
            m.commit_time = r.i64("the commit time");
            if (m.end_lsn < m.commit_lsn) r.fail("the end LSN is before the commit LSN");
            out = m;
            break;
        }
        case 'O': {
            origin m;
            m.lsn = r.u64("the origin LSN");
            m.name = r.cstring("origin name");
            out = std::move(m);
            break;
        }
        case 'R':
            out = read_relation(r);
            break;
        case 'Y': {
            type m;
            m.oid = r.u32("the type oid");
            m.schema = r.cstring("type schema");
            m.name = r.cstring("type name");
            out = std::move(m);
            break;
        }
        case 'I': {
            insert m;
            m.relation = r.u32("the relation oid");
            tuple_tag(r, "N");
            m.new_row = read_tuple(r);
            out = std::move(m);
            break;
        }
        case 'U': {
            update m;
            m.relation = r.u32("the relation oid");
            const char tag2 = tuple_tag(r, "KON");
            if (tag2 != 'N') {
                m.old_kind = tag2;
                m.old_row = read_tuple(r);
                tuple_tag(r, "N");
            }
            m.new_row = read_tuple(r);
            out = std::move(m);
            break;
        }
        case 'D': {
            remove m;
            m.relation = r.u32("the relation oid");
            m.old_kind = tuple_tag(r, "KO");
            m.old_row = read_tuple(r);
            out = std::move(m);
            break;
        }
        case 'T': {
            truncate m;
            const std::uint32_t n = r.u32("the relation count");
            // Each oid is 4 bytes: a count the message cannot hold is refused before reserving.
            if (r.left() < 1 || n > (r.left() - 1) / 4) {
                r.fail("truncate of " + std::to_string(n) + " relations does not fit the message");
            }
            m.options = r.u8("the truncate options");
            m.relations.reserve(n);
            for (std::uint32_t i = 0; i < n; ++i) m.relations.push_back(r.u32("a relation oid"));
            out = std::move(m);
            break;
        }
        case 'M': {
            logical_message m;
            const auto flags = r.u8("the message flags");
            if (flags > 1) r.fail("unknown message flags " + std::to_string(flags));
            m.transactional = flags == 1;
            m.lsn = r.u64("the message LSN");
            m.prefix = r.cstring("message prefix");
            const std::int32_t len = r.i32("the content length");
            if (len < 0) r.fail("negative content length " + std::to_string(len));
            m.content = r.bytes(static_cast<std::size_t>(len), "the content");
            out = std::move(m);
            break;
        }
        default:
            throw decode_error(std::string("unknown message type 0x") +
                                   "0123456789abcdef"[(tag >> 4) & 15] +
                                   "0123456789abcdef"[tag & 15],
                               0);
    }
    r.done();
    return out;
}

}  // namespace awp::realtime::pgoutput
