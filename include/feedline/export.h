// Symbol visibility for feedline's public API. The library builds with
// -fvisibility=hidden; FEEDLINE_EXPORT marks what a shared build exports.
#ifndef FEEDLINE_EXPORT_H_
#define FEEDLINE_EXPORT_H_

#define FEEDLINE_EXPORT __attribute__((visibility("default")))

#endif  // FEEDLINE_EXPORT_H_
