// Package parquetjson writes the rows of a Parquet file as JSON objects,
// by one mapping that loses nothing: every value a consumer reads back is
// the value the file holds, and what JSON cannot carry exactly is refused
// with an error that names the column.
//
// The mapping, by physical and logical type (docs/formats.md has the
// table):
//
//   - BOOLEAN: true or false.
//   - INT32, INT64, and the INTEGER types, signed or not: a JSON number with
//     every digit (an unsigned 64-bit 2^63 is 9223372036854775808).
//   - FLOAT, DOUBLE, FLOAT16: the shortest number that reads back as the
//     same value; NaN and the infinities, which JSON has no number for,
//     as the strings "NaN", "Infinity" and "-Infinity".
//   - DECIMAL, on any physical type: a string of its exact digits, scale
//     kept ("9007199254740993.12", "0.00").
//   - DATE: "YYYY-MM-DD". TIME: "HH:MM:SS" with the unit's digits, and "Z"
//     when adjusted to UTC. TIMESTAMP: RFC 3339 with the unit's digits
//     (3, 6 or 9), "Z" when adjusted to UTC, no offset when local. INT96
//     (Spark's, Hive's and Impala's timestamps): the Julian day and the
//     nanoseconds of the day, as RFC 3339 in UTC with 9 digits. Years
//     outside 0000-9999 take a sign and more digits, as ISO 8601 allows.
//   - STRING, ENUM, JSON: a JSON string of the text (JSON stays a string:
//     the text as written), refused if it is not valid UTF-8. UUID: the
//     canonical 8-4-4-4-12 hex form. INTERVAL: {"months","days",
//     "milliseconds"}.
//   - Other BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY (no annotation, BSON,
//     GEOMETRY, GEOGRAPHY): base64, standard alphabet with padding; with
//     Options.BinaryAsString, unannotated ones as text.
//   - Groups: objects with their fields in schema order. LIST groups, in
//     the standard three-level layout and in the two-level layouts of
//     older writers (read by the backward-compatibility rules of the
//     format's LogicalTypes.md), and repeated fields outside a LIST or
//     MAP: arrays. MAP and MAP_KEY_VALUE groups: objects, each key as its
//     string, or, for a key that is not a string, the JSON text of its
//     value (1 as "1"); a map with one key twice is refused. A MAP whose
//     entries have no value field: an array of its keys.
//   - A null at any level: null (a null LIST or MAP too); an empty list
//     or map: [] or {}. A repeated field outside a LIST has no null: no
//     values is [].
package parquetjson
