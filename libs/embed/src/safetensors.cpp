// Reading (mmap) and writing safetensors files: u64 header length, JSON header, raw tensor data.
#include <fcntl.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <awp/core/json.hpp>
#include <awp/embed/error.hpp>
#include <awp/embed/safetensors.hpp>

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

namespace awp::embed {

namespace {

constexpr std::uint64_t kMaxHeader = 100U << 20U;  // the format's own limit is 100 MB

std::size_t dtype_size(std::string_view dtype) {
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
        dtype == "F8_E5M2")
        return 1;
    return 0;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) s += ",";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

}  // namespace

float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16U;
    std::uint32_t exponent = (h >> 10U) & 0x1FU;
    std::uint32_t mantissa = h & 0x3FFU;
    std::uint32_t bits = 0;
    if (exponent == 0x1F) {
        bits = sign | 0x7F800000U | (mantissa << 13U);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112U) << 23U) | (mantissa << 13U);
    } else if (mantissa != 0) {  // subnormal: normalise
        exponent = 113;
        while ((mantissa & 0x400U) == 0) {
            mantissa <<= 1U;
            --exponent;
        }
        bits = sign | (exponent << 23U) | ((mantissa & 0x3FFU) << 13U);
    } else {
        bits = sign;
    }
    return std::bit_cast<float>(bits);
}

std::uint16_t float_to_half(float f) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((bits >> 16U) & 0x8000U);
    const std::uint32_t abs = bits & 0x7FFFFFFFU;
    if (abs >= 0x7F800000U)  // inf or nan
        return static_cast<std::uint16_t>(sign | 0x7C00U | (abs > 0x7F800000U ? 0x200U : 0U));
    if (abs >= 0x477FF000U) return static_cast<std::uint16_t>(sign | 0x7C00U);  // overflow
    if (abs < 0x38800000U) {  // subnormal half (or zero): round the shifted mantissa
        if (abs < 0x33000000U) return sign;
        const std::uint32_t exponent = abs >> 23U;
        const std::uint32_t mantissa = (abs & 0x7FFFFFU) | 0x800000U;
        const std::uint32_t shift = 126U - exponent;
        std::uint32_t half = mantissa >> shift;
        const std::uint32_t rest = mantissa & ((1U << shift) - 1U);
        const std::uint32_t halfway = 1U << (shift - 1U);
        if (rest > halfway || (rest == halfway && (half & 1U))) ++half;
        return static_cast<std::uint16_t>(sign | half);
    }
    std::uint32_t half = ((abs - 0x38000000U) >> 13U);
    const std::uint32_t rest = abs & 0x1FFFU;
    if (rest > 0x1000U || (rest == 0x1000U && (half & 1U))) ++half;
    return static_cast<std::uint16_t>(sign | half);
}

safetensors_file::safetensors_file(const std::filesystem::path& path) : path_(path) {
    const std::string name = path.lexically_normal().string();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw error(name + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size < 8) {
        ::close(fd);
        throw error(name + ": not a safetensors file (shorter than its 8-byte header length)");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map_ == MAP_FAILED) {
        map_ = nullptr;
        throw error(name + ": mmap failed: " + std::strerror(errno));
    }
    try {
        const auto* bytes = static_cast<const std::byte*>(map_);
        std::uint64_t header_len = 0;
        for (int i = 7; i >= 0; --i)
            header_len = (header_len << 8U) | std::to_integer<std::uint64_t>(bytes[i]);
        if (header_len > kMaxHeader || header_len > size_ - 8)
            throw error(name + ": header length " + std::to_string(header_len) +
                        " does not fit the file (" + std::to_string(size_) + " bytes)");
        rapidjson::Document doc;
        try {
            doc =
                core::json::parse_object(std::string_view(reinterpret_cast<const char*>(bytes + 8),
                                                          static_cast<std::size_t>(header_len)),
                                         {kMaxHeader, 16});
        } catch (const core::json::parse_error& e) {
            throw error(name + ": header is not a JSON object (" + e.what() + ")");
        }
        const std::size_t data_start = 8 + static_cast<std::size_t>(header_len);
        const std::size_t data_size = size_ - data_start;
        for (const auto& entry : doc.GetObject()) {
            const std::string tensor(entry.name.GetString(), entry.name.GetStringLength());
            if (tensor == "__metadata__") continue;
            const auto& v = entry.value;
            const auto bad = [&](const std::string& what) {
                return error(name + ": tensor '" + tensor + "': " + what);
            };
            if (!v.IsObject() || !v.HasMember("dtype") || !v["dtype"].IsString() ||
                !v.HasMember("shape") || !v["shape"].IsArray() || !v.HasMember("data_offsets") ||
                !v["data_offsets"].IsArray() || v["data_offsets"].Size() != 2)
                throw bad("needs dtype, shape and data_offsets");
            tensor_info info;
            info.dtype = v["dtype"].GetString();
            std::uint64_t count = 1;
            for (const auto& d : v["shape"].GetArray()) {
                if (!d.IsInt64() || d.GetInt64() < 0) throw bad("shape must hold sizes");
                info.shape.push_back(d.GetInt64());
                count *= static_cast<std::uint64_t>(d.GetInt64());
            }
            const auto& offsets = v["data_offsets"];
            if (!offsets[0].IsUint64() || !offsets[1].IsUint64()) throw bad("bad data_offsets");
            const std::uint64_t begin = offsets[0].GetUint64();
            const std::uint64_t end = offsets[1].GetUint64();
            if (begin > end || end > data_size)
                throw bad("data_offsets [" + std::to_string(begin) + "," + std::to_string(end) +
                          "] lie outside the " + std::to_string(data_size) +
                          " data bytes (truncated file?)");
            const std::size_t element = dtype_size(info.dtype);
            if (element != 0 && count * element != end - begin)
                throw bad("shape " + shape_text(info.shape) + " of " + info.dtype + " needs " +
                          std::to_string(count * element) + " bytes, data_offsets give " +
                          std::to_string(end - begin));
            info.data = {bytes + data_start + begin, static_cast<std::size_t>(end - begin)};
            tensors_.emplace(tensor, std::move(info));
        }
    } catch (...) {
        ::munmap(map_, size_);
        map_ = nullptr;
        throw;
    }
}

safetensors_file::safetensors_file(safetensors_file&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      tensors_(std::move(other.tensors_)) {}

safetensors_file::~safetensors_file() {
    if (map_ != nullptr) ::munmap(map_, size_);
}

const tensor_info* safetensors_file::find(std::string_view name) const {
    const auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<float> safetensors_file::to_f32(std::string_view name) const {
    const tensor_info* t = find(name);
    if (t == nullptr)
        throw error(path_.lexically_normal().string() + ": no tensor '" + std::string(name) + "'");
    std::vector<float> out;
    const std::byte* p = t->data.data();
    if (t->dtype == "F32") {
        out.resize(t->data.size() / 4);
        std::memcpy(out.data(), p, out.size() * 4);  // little-endian host (x86-64, aarch64)
    } else if (t->dtype == "F16" || t->dtype == "BF16") {
        out.resize(t->data.size() / 2);
        const bool bf16 = t->dtype == "BF16";
        for (std::size_t i = 0; i < out.size(); ++i) {
            std::uint16_t h = 0;
            std::memcpy(&h, p + 2 * i, 2);
            out[i] = bf16 ? std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16U)
                          : half_to_float(h);
        }
    } else {
        throw error(path_.lexically_normal().string() + ": tensor '" + std::string(name) +
                    "' has dtype " + t->dtype + "; only F32, F16 and BF16 are supported");
    }
    return out;
}

void write_safetensors(const std::filesystem::path& path, std::span<const tensor_to_write> tensors,
                       stored_type type) {
    const std::size_t element = type == stored_type::f32 ? 4 : 2;
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
    w.StartObject();
    w.Key("__metadata__");
    w.StartObject();
    w.Key("format");
    w.String("pt");
    w.EndObject();
    std::uint64_t offset = 0;
    for (const auto& t : tensors) {
        std::uint64_t count = 1;
        for (auto d : t.shape) count *= static_cast<std::uint64_t>(d);
        if (count != t.values.size())
            throw error(path.string() + ": tensor '" + t.name + "' has " +
                        std::to_string(t.values.size()) + " values for shape " +
                        shape_text(t.shape));
        w.Key(t.name.c_str());
        w.StartObject();
        w.Key("dtype");
        w.String(type == stored_type::f32 ? "F32" : "F16");
        w.Key("shape");
        w.StartArray();
        for (auto d : t.shape) w.Int64(d);
        w.EndArray();
        w.Key("data_offsets");
        w.StartArray();
        w.Uint64(offset);
        w.Uint64(offset + count * element);
        w.EndArray();
        w.EndObject();
        offset += count * element;
    }
    w.EndObject();
    std::string header(buffer.GetString(), buffer.GetSize());
    header.append((8 - header.size() % 8) % 8, ' ');

    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw error(path.string() + ": cannot create");
    std::uint64_t len = header.size();
    char len_bytes[8];
    for (char& b : len_bytes) {
        b = static_cast<char>(len & 0xFFU);
        len >>= 8U;
    }
    out.write(len_bytes, 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    std::vector<char> chunk;
    for (const auto& t : tensors) {
        chunk.resize(t.values.size() * element);
        if (type == stored_type::f32) {
            std::memcpy(chunk.data(), t.values.data(), chunk.size());
        } else {
            for (std::size_t i = 0; i < t.values.size(); ++i) {
                const std::uint16_t h = float_to_half(t.values[i]);
                std::memcpy(chunk.data() + 2 * i, &h, 2);
            }
        }
        out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    }
    if (!out.flush()) throw error(path.string() + ": write failed");
}

}  // namespace awp::embed
