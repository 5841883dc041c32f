// gangkeeper: the compiled parts of Boost.Asio and Boost.Beast, once for the
// server module (BOOST_ASIO_SEPARATE_COMPILATION and
// BOOST_BEAST_SEPARATE_COMPILATION are set for its sources), so that
// transport.cc and connection.cc parse only the declarations.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
