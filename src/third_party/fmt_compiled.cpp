// fmt's compiled part, built once for the whole tree: the other files see only declarations of
// what fmt/format-inl.h defines (FMT_HEADER_ONLY is off, cmake/Dependencies.cmake) instead of
// generating it again in every unit. Made from fmt's headers, so a host that has only those
// (GPULAB_DEPS_ROOT) builds it too.
#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
namespace detail {

// The templates fmt's headers declare (some as extern templates) and define only in format-inl.h
// (the rest, buffer::append and vformat_to among them, are defined in format.h itself).
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;

}  // namespace detail
FMT_END_NAMESPACE
