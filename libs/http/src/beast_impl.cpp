// Boost.Beast compiled once for every target that links awp::http, and Asio's SSL part (the
// client's https), which BOOST_ASIO_SEPARATE_COMPILATION leaves out of core's asio_impl.cpp.
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
