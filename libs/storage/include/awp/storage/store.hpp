// The object store: where the bytes of /storage/v1 objects live, behind one interface, so that
// an S3-compatible store can stand in for the local file system (docs/storage.md, "The store").
//
// The store keeps immutable versions: each write makes a new version id, and Postgres
// (storage.objects.version) says which version is an object's. An object name never reaches
// the store. The protocol that keeps a crash (kill -9 at any point) from leaving a half file
// visible or a row without bytes:
//
//   1. create()/adopt(): the bytes are written (and hashed) where no one can see them, made
//      durable, then *staged*: named under a new version, with a marker that says "no row yet".
//   2. the row naming the version commits (the caller's transaction);
//   3. publish(): the marker goes. If the transaction failed instead, discard() removes both.
//
// A process killed between 1 and 3 leaves its markers behind; abandoned() finds the markers of
// processes that are gone, and settle() keeps a version whose row exists and removes one whose
// row does not. Versions whose rows were deleted or replaced are queued in the database
// (storage.deleted_versions) and removed with remove() after a grace period.
//
// Every call blocks (file I/O, fsync): the api-gateway calls them on its storage thread pool.
// Calls may come from several threads at once.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "awp/core/error.hpp"

namespace awp::storage {

/// A file system call failed; error_number() is its errno (ENOSPC, EDQUOT: the disk is full).
class store_error : public core::error {
public:
    store_error(const std::string& what, int err);
    [[nodiscard]] int error_number() const noexcept { return err_; }
    [[nodiscard]] bool disk_full() const noexcept { return err_ == ENOSPC || err_ == EDQUOT; }

private:
    int err_;
};

/// A new object's bytes: durable, staged under a version no committed row names yet.
struct staged_object {
    std::string version;
    std::uint64_t size = 0;
    std::string md5_hex;  ///< the ETag's value
    std::string sniffed;  ///< sniff() of the first bytes
};

/// The bytes of one new object on their way in: written in order, hashed as they pass.
/// Destroyed before stage(), everything written is gone.
class object_writer {
public:
    virtual ~object_writer() = default;
    virtual void write(std::string_view bytes) = 0;
    /// Makes the bytes durable and stages them (protocol step 1).
    virtual staged_object stage() = 0;
};

struct store_space {
    std::uint64_t free_bytes = 0;  ///< what an unprivileged writer may still use
    std::uint64_t total_bytes = 0;
};

/// A version staged by a process that is gone.
struct abandoned_version {
    std::string holder;  ///< the store's name for the process that staged it
    std::string version;
};

class object_store {
public:
    virtual ~object_store() = default;
    /// Where request bodies should be spooled so that adopt() takes them without a copy.
    [[nodiscard]] virtual std::string spool_dir() const = 0;
    virtual std::unique_ptr<object_writer> create() = 0;
    /// The whole of an open file of `size` bytes (a spooled request body): hashed, made durable
    /// and staged, without a copy when it is an unnamed file in spool_dir().
    virtual staged_object adopt(int fd, std::uint64_t size) = 0;
    /// A new staged version with the bytes of published `version` (a copy), shared where the
    /// store can (the bytes never change).
    virtual std::string copy(std::string_view version) = 0;
    /// The row naming a staged version committed (protocol step 3).
    virtual void publish(std::string_view version) = 0;
    /// No row will name a staged version: its bytes go. Never throws.
    virtual void discard(std::string_view version) noexcept = 0;
    /// A published version's bytes, open for reading (the caller closes it); -1 with errno set
    /// (ENOENT: no such version).
    [[nodiscard]] virtual int open(std::string_view version) = 0;
    /// Removes a version's bytes; a missing version is not an error.
    virtual void remove(std::string_view version) = 0;
    /// Versions staged by processes that are gone (their markers); each must be settle()d.
    virtual std::vector<abandoned_version> abandoned() = 0;
    /// Keeps `v` (its row exists: it is published) or removes it (no row names it).
    virtual void settle(const abandoned_version& v, bool has_row) = 0;
    [[nodiscard]] virtual store_space space() = 0;
};

/// A version id as the stores make them: 32 lowercase hex digits.
[[nodiscard]] bool is_version(std::string_view v) noexcept;

struct local_store_options {
    std::string dir;    ///< STORAGE_DIR; made (0700) when missing
    bool fsync = true;  ///< fsync files and directories before a row names them
};

/// The local file system store (docs/storage.md, "On disk"):
///   <dir>/.awp-store               marks the folder as a store (a non-empty folder without it
///                                  is refused: STORAGE_DIR pointing at the wrong place)
///   <dir>/objects/<xx>/<version>   the published bytes (xx: the version's first two digits)
///   <dir>/staging/<holder>/        this process's markers and request bodies on their way in,
///                                  locked (flock) for the process's life; a folder whose lock
///                                  can be taken belongs to a process that is gone
/// Throws core::config_error when the folder cannot be used.
[[nodiscard]] std::unique_ptr<object_store> open_local_store(const local_store_options& o);

/// Bytes free and in total on the file system holding `dir` (statvfs); throws store_error.
[[nodiscard]] store_space disk_space(const std::string& dir);

}  // namespace awp::storage
