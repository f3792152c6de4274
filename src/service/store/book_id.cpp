// The book_identity row.
#include "service/store/book_id.h"

namespace gpulab::service {

std::string book_id(Store& store) {
  return store.transaction([&] {
    auto rows = store.db().query("SELECT book_id FROM book_identity WHERE id=1");
    if (!rows.empty()) return rows[0].str(0);
    store.db().exec("INSERT INTO book_identity(id,book_id) VALUES(1,lower(hex(randomblob(8))))");
    return store.db().query("SELECT book_id FROM book_identity WHERE id=1")[0].str(0);
  });
}

bool made_by_this_book(Store& store, const std::map<std::string, std::string>& labels) {
  auto label = labels.find(kBookLabel);
  return label != labels.end() && label->second == book_id(store);
}

}  // namespace gpulab::service
