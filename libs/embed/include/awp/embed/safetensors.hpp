// Reading (mmap) and writing safetensors files: u64 header length, JSON header, raw tensor data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace awp::embed {

struct tensor_info {
    std::string dtype;  ///< "F32", "F16", "BF16", "I64", ...
    std::vector<std::int64_t> shape;
    std::span<const std::byte> data;
};

/// A memory-mapped safetensors file. Every offset and size is checked when it is opened.
class safetensors_file {
public:
    explicit safetensors_file(const std::filesystem::path& path);
    ~safetensors_file();
    safetensors_file(safetensors_file&& other) noexcept;
    safetensors_file& operator=(safetensors_file&&) = delete;
    safetensors_file(const safetensors_file&) = delete;
    safetensors_file& operator=(const safetensors_file&) = delete;

    const std::filesystem::path& path() const { return path_; }
    const tensor_info* find(std::string_view name) const;
    const std::map<std::string, tensor_info, std::less<>>& tensors() const { return tensors_; }
    /// The tensor as fp32 (from F32, F16 or BF16); throws naming the file and tensor otherwise.
    std::vector<float> to_f32(std::string_view name) const;

private:
    std::filesystem::path path_;
    void* map_ = nullptr;
    std::size_t size_ = 0;
    std::map<std::string, tensor_info, std::less<>> tensors_;
};

/// One tensor to write: fp32 values, stored as F32 or F16.
struct tensor_to_write {
    std::string name;
    std::vector<std::int64_t> shape;
    std::span<const float> values;
};

enum class stored_type { f32, f16 };

/// Writes a safetensors file (used by the benchmark and the tests to make model folders).
void write_safetensors(const std::filesystem::path& path, std::span<const tensor_to_write> tensors,
                       stored_type type);

/// IEEE half <-> single, round to nearest even; exposed for tests.
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);

}  // namespace awp::embed
