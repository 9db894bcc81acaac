// Boost.Beast compiled once for every target that links awp::http.
#include <boost/beast/src.hpp>
