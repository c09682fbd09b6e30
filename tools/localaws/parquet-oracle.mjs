// parquet-oracle reads and writes Parquet with implementations other than
// the Go library s3sqs reads with: arrow-rs (the Rust implementation, as
// the parquet-wasm package builds it), to hold s3sqs's Parquet to JSON
// mapping (docs/formats.md) to an independent reader, and to write the
// files of the conformance tests with a second writer.
//
//   node parquet-oracle.mjs read FILE...
//     prints one JSON line per file: {"file":F,"rows":[...]} with each row
//     written by the documented mapping from the values arrow-rs read, or
//     {"file":F,"error":"..."} when arrow-rs refuses the file.
//   node parquet-oracle.mjs write DIR SPEC
//     writes the table below once per variant of SPEC, a JSON array of
//     {"name","compression","encoding","dictionary","version","pageRows"};
//     encoding applies to the columns whose physical type takes it.
//
// The mapping is written here again from Arrow's types, not from
// Parquet's, so that a mistake in the Go mapping does not repeat here.
import * as pw from 'parquet-wasm'
import * as arrow from 'apache-arrow'
import { parquetMetadata } from 'hyparquet'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

// readFile returns the rows of a file as JSON texts, or its error.
function readFile(file) {
  let table
  const bytes = readFileSync(file)
  try {
    table = arrow.tableFromIPC(pw.readParquet(bytes).intoIPCStream())
  } catch (e) {
    return { file, error: String(e) }
  }
  // arrow-rs reads INT96 as a timestamp without a zone; s3sqs, as Spark,
  // takes it as UTC. The footer (read here by a third implementation,
  // hyparquet) says which columns are INT96.
  const elems = parquetMetadata(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)).schema
  const int96 = new Set(elems.filter(e => e.type === 'INT96').map(e => e.name))
  // Arrow's time types do not say whether the column is adjusted to UTC.
  for (const e of elems) {
    if (e.logical_type?.type === 'UUID') uuids.add(e.name)
    if (e.logical_type?.type === 'TIME') timeUTC.set(e.name, e.logical_type.isAdjustedToUTC)
    else if (e.converted_type === 'TIME_MILLIS' || e.converted_type === 'TIME_MICROS') timeUTC.set(e.name, true)
  }
  const rows = []
  for (const batch of table.batches) {
    for (let i = 0; i < batch.numRows; i++) {
      const parts = batch.schema.fields.map((f, c) =>
        JSON.stringify(f.name) + ':' + value(batch.data.children[c], i, int96.has(f.name), f.name))
      rows.push('{' + parts.join(',') + '}')
    }
  }
  return { file, rows }
}

const T = arrow.Type

// timeUTC says, by column name, whether a TIME column is adjusted to UTC;
// uuids names the UUID columns, which Arrow reads as 16 bytes.
const timeUTC = new Map()
const uuids = new Set()

// value returns the JSON text of element i of data.
function value(data, i, int96 = false, name = '') {
  if (data.typeId === T.Null || !data.getValid(i)) return 'null'
  const t = data.type
  const j = data.offset + i
  switch (data.typeId) {
    case T.Bool:
      return String(((data.values[j >> 3] >> (j & 7)) & 1) === 1)
    case T.Int:
      return String(data.values[j])
    case T.Float:
      if (t.precision === arrow.Precision.HALF) return float(half(data.values[j]), true)
      return float(data.values[j], t.precision === arrow.Precision.SINGLE)
    case T.Utf8:
    case T.LargeUtf8:
      return jsonString(new TextDecoder('utf-8', { fatal: true }).decode(bytesOf(data, j)))
    case T.Binary:
    case T.LargeBinary:
      return '"' + Buffer.from(bytesOf(data, j)).toString('base64') + '"'
    case T.FixedSizeBinary: {
      const b = data.values.subarray(j * t.byteWidth, (j + 1) * t.byteWidth)
      if (uuids.has(name)) {
        const h = Buffer.from(b).toString('hex')
        return `"${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}"`
      }
      return '"' + Buffer.from(b).toString('base64') + '"'
    }
    case T.Decimal: {
      const words = t.bitWidth / 32
      let n = 0n
      for (let w = words - 1; w >= 0; w--) n = (n << 32n) | BigInt(data.values[j * words + w] >>> 0)
      if (n >= 1n << BigInt(t.bitWidth - 1)) n -= 1n << BigInt(t.bitWidth)
      return '"' + scaled(n, t.scale) + '"'
    }
    case T.Date:
      if (t.unit === arrow.DateUnit.DAY) return '"' + date(BigInt(data.values[j]) * 86400n) + '"'
      return '"' + date(BigInt(data.values[j]) / 1000n) + '"'
    case T.Time: {
      const per = perSecond(t.unit)
      const n = BigInt(data.values[j])
      const sec = n / per
      const clock = pad(sec / 3600n, 2) + ':' + pad((sec / 60n) % 60n, 2) + ':' + pad(sec % 60n, 2)
      return '"' + clock + '.' + pad(n % per, digits(t.unit)) + (timeUTC.get(name) ? 'Z' : '') + '"'
    }
    case T.Timestamp: {
      const per = perSecond(t.unit)
      const n = BigInt(data.values[j])
      let sec = n / per
      let frac = n % per
      if (frac < 0n) { sec -= 1n; frac += per }
      const utc = t.timezone != null || int96
      return '"' + instant(sec) + '.' + pad(frac, digits(t.unit)) + (utc ? 'Z' : '') + '"'
    }
    case T.List:
    case T.LargeList: {
      const from = Number(data.valueOffsets[j])
      const to = Number(data.valueOffsets[j + 1])
      const out = []
      for (let k = from; k < to; k++) out.push(value(data.children[0], k))
      return '[' + out.join(',') + ']'
    }
    case T.FixedSizeList: {
      const out = []
      for (let k = j * t.listSize; k < (j + 1) * t.listSize; k++) out.push(value(data.children[0], k))
      return '[' + out.join(',') + ']'
    }
    case T.Struct:
      return '{' + t.children.map((f, c) => JSON.stringify(f.name) + ':' + value(data.children[c], j)).join(',') + '}'
    case T.Map: {
      const entries = data.children[0]
      const from = data.valueOffsets[j]
      const to = data.valueOffsets[j + 1]
      const out = []
      for (let k = from; k < to; k++) {
        let key = value(entries.children[0], entries.offset + k)
        if (!key.startsWith('"')) key = JSON.stringify(key)
        out.push(key + ':' + value(entries.children[1], entries.offset + k))
      }
      return '{' + out.join(',') + '}'
    }
  }
  throw new Error('no mapping for Arrow type ' + String(t))
}

function bytesOf(data, j) {
  return data.values.subarray(Number(data.valueOffsets[j]), Number(data.valueOffsets[j + 1]))
}

// float writes a number as JavaScript does (the shortest text that reads
// back as the same double, or for a float32 as the same float32), NaN and
// the infinities as strings.
function float(x, single) {
  if (Number.isNaN(x)) return '"NaN"'
  if (x === Infinity) return '"Infinity"'
  if (x === -Infinity) return '"-Infinity"'
  if (Object.is(x, -0)) return '-0'
  if (single) {
    for (let p = 1; p <= 9; p++) {
      const s = x.toPrecision(p)
      if (Math.fround(Number(s)) === x) return String(Number(s))
    }
  }
  return String(x)
}

function half(h) {
  const sign = h & 0x8000 ? -1 : 1
  const exp = (h >> 10) & 0x1f
  const frac = h & 0x3ff
  if (exp === 0x1f) return frac ? NaN : sign * Infinity
  if (exp === 0) return sign * frac * 2 ** -24
  return sign * (1 + frac / 1024) * 2 ** (exp - 15)
}

function scaled(n, scale) {
  const neg = n < 0n
  let s = (neg ? -n : n).toString()
  if (scale > 0) {
    s = s.padStart(scale + 1, '0')
    s = s.slice(0, s.length - scale) + '.' + s.slice(s.length - scale)
  } else if (scale < 0) {
    s += '0'.repeat(-scale)
  }
  return (neg ? '-' : '') + s
}

function perSecond(unit) {
  return [1n, 1000n, 1000000n, 1000000000n][unit]
}

function digits(unit) {
  return [0, 3, 6, 9][unit]
}

function pad(n, width) {
  return String(n).padStart(width, '0')
}

// date writes the date of sec seconds since the epoch, proleptic
// Gregorian, from the civil-from-days algorithm (not Date, whose range
// ends at year 275760).
function date(sec) {
  let days = sec / 86400n
  if (sec % 86400n < 0n) days -= 1n
  const z = days + 719468n
  const era = (z >= 0n ? z : z - 146096n) / 146097n
  const doe = z - era * 146097n
  const yoe = (doe - doe / 1460n + doe / 36524n - doe / 146096n) / 365n
  const doy = doe - (365n * yoe + yoe / 4n - yoe / 100n)
  const mp = (5n * doy + 2n) / 153n
  const d = doy - (153n * mp + 2n) / 5n + 1n
  const m = mp < 10n ? mp + 3n : mp - 9n
  const y = yoe + era * 400n + (m <= 2n ? 1n : 0n)
  let year = pad(y < 0n ? -y : y, 4)
  if (y < 0n) year = '-' + year
  else if (y > 9999n) year = '+' + year
  return year + '-' + pad(m, 2) + '-' + pad(d, 2)
}

function instant(sec) {
  let s = sec % 86400n
  if (s < 0n) s += 86400n
  return date(sec) + 'T' + pad(s / 3600n, 2) + ':' + pad((s / 60n) % 60n, 2) + ':' + pad(s % 60n, 2)
}

// jsonString writes s as JSON, U+2028 and U+2029 escaped as Go's
// encoding/json escapes them; the test compares parsed values anyway.
function jsonString(s) {
  return JSON.stringify(s).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
}

// writeFiles writes the conformance table once per variant.
function writeFiles(dir, variants) {
  const table = conformanceTable()
  const ipc = arrow.tableToIPC(table, 'stream')
  for (const v of variants) {
    let b = new pw.WriterPropertiesBuilder()
      .setCompression(pw.Compression[v.compression])
      .setWriterVersion(v.version === 2 ? pw.WriterVersion.V2 : pw.WriterVersion.V1)
      .setDictionaryEnabled(v.dictionary)
      .setMaxRowGroupSize(v.groupRows || 1024 * 1024)
      .setDataPageSizeLimit(v.pageBytes || 1024 * 1024)
      .setWriteBatchSize(v.batchRows || 1024)
    if (v.encoding && v.encoding !== 'PLAIN_DICTIONARY') {
      for (const [col, kinds] of Object.entries(physicalKinds)) {
        if (encodingFits[v.encoding].some(k => kinds === k)) b = b.setColumnEncoding(col, pw.Encoding[v.encoding])
      }
    }
    const out = pw.writeParquet(pw.Table.fromIPCStream(ipc), b.build())
    writeFileSync(join(dir, v.name + '.parquet'), out)
  }
}

// The encodings arrow-rs writes for each physical type.
const encodingFits = {
  PLAIN: ['bool', 'int32', 'int64', 'float', 'double', 'bytes', 'fixed'],
  RLE: ['bool'],
  DELTA_BINARY_PACKED: ['int32', 'int64'],
  DELTA_LENGTH_BYTE_ARRAY: ['bytes'],
  DELTA_BYTE_ARRAY: ['bytes', 'fixed'],
  BYTE_STREAM_SPLIT: ['float', 'double', 'int32', 'int64', 'fixed'],
}

// physicalKinds is the physical type of each top-level column of the
// conformance table, for the encodings.
const physicalKinds = {
  bool: 'bool', i8: 'int32', i16: 'int32', i32: 'int32', i64: 'int64',
  u8: 'int32', u16: 'int32', u32: 'int32', u64: 'int64',
  f16: 'fixed', f32: 'float', f64: 'double',
  text: 'bytes', bin: 'bytes', fixed: 'fixed',
  dec9: 'int32', dec18: 'int64', dec38: 'fixed',
  date: 'int32', time_ms: 'int32', time_us: 'int64', time_ns: 'int64',
  ts_ms_utc: 'int64', ts_us_utc: 'int64', ts_ns_utc: 'int64', ts_us_local: 'int64',
}

const ROWS = 6

// valid returns a validity bitmap of ROWS bits with row null cleared.
function valid(nullRow) {
  const b = new Uint8Array(1)
  for (let i = 0; i < ROWS; i++) if (i !== nullRow) b[0] |= 1 << i
  return b
}

function col(type, values, nullRow = 3) {
  return arrow.makeData({ type, length: ROWS, nullCount: 1, nullBitmap: valid(nullRow), data: values })
}

function bytesCol(type, items, nullRow = 3) {
  const enc = items.map(x => (typeof x === 'string' ? new TextEncoder().encode(x) : Uint8Array.from(x)))
  const offsets = new Int32Array(ROWS + 1)
  enc.forEach((e, i) => { offsets[i + 1] = offsets[i] + e.length })
  const data = new Uint8Array(offsets[ROWS])
  enc.forEach((e, i) => data.set(e, offsets[i]))
  return arrow.makeData({ type, length: ROWS, nullCount: 1, nullBitmap: valid(nullRow), valueOffsets: offsets, data })
}

function decimalWords(values, bitWidth) {
  const words = bitWidth / 32
  const out = new Uint32Array(ROWS * words)
  values.forEach((v, i) => {
    let n = BigInt.asUintN(bitWidth, v)
    for (let w = 0; w < words; w++) { out[i * words + w] = Number(n & 0xffffffffn); n >>= 32n }
  })
  return out
}

// conformanceTable holds every type arrow-rs writes, with the values at
// the edges of each (extremes, NaN, -0, text that needs escaping, bytes
// that are not UTF-8), a null in each column, and nested lists, structs
// and maps.
function conformanceTable() {
  const big = 2n ** 63n
  const cols = {
    bool: col(new arrow.Bool(), Uint8Array.of(0b101101)),
    i8: col(new arrow.Int8(), Int8Array.of(-128, 127, 0, 0, -1, 5)),
    i16: col(new arrow.Int16(), Int16Array.of(-32768, 32767, 0, 0, -1, 5)),
    i32: col(new arrow.Int32(), Int32Array.of(-2147483648, 2147483647, 0, 0, -1, 5)),
    i64: col(new arrow.Int64(), BigInt64Array.of(-big, big - 1n, 9007199254740993n, 0n, -1n, 5n)),
    u8: col(new arrow.Uint8(), Uint8Array.of(255, 0, 128, 0, 1, 5)),
    u16: col(new arrow.Uint16(), Uint16Array.of(65535, 0, 32768, 0, 1, 5)),
    u32: col(new arrow.Uint32(), Uint32Array.of(4294967295, 0, 2147483648, 0, 1, 5)),
    u64: col(new arrow.Uint64(), BigUint64Array.of(2n ** 64n - 1n, 0n, big, 0n, 1n, 5n)),
    f16: col(new arrow.Float16(), Uint16Array.of(0x3c00, 0x7c00, 0x7e00, 0, 0x0001, 0x8000)),
    f32: col(new arrow.Float32(), Float32Array.of(0.1, -Infinity, NaN, 0, 3.4028234663852886e38, -0)),
    f64: col(new arrow.Float64(), Float64Array.of(0.1, 1e21, NaN, 0, 5e-324, Infinity)),
    text: bytesCol(new arrow.Utf8(), ['plain', 'quote " and \\ and \n\t', 'é 漢字 🙂', '', '\u2028\u0000', '15" screen']),
    bin: bytesCol(new arrow.Binary(), [[0xff, 0x00, 0xfe], [], [0xc3, 0x28], [], [0x80], [0x41]]),
    fixed: col(new arrow.FixedSizeBinary(3), Uint8Array.of(1, 2, 3, 0xff, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 9, 9, 9, 0x41, 0x42, 0x43)),
    dec9: col(new arrow.Decimal(2, 9, 128), decimalWords([123456789n, -1n, 0n, 0n, 5n, -999999999n], 128)),
    dec18: col(new arrow.Decimal(2, 18, 128), decimalWords([900719925474099312n, -900719925474099312n, 1n, 0n, 999999999999999999n, -5n], 128)),
    dec38: col(new arrow.Decimal(10, 38, 128), decimalWords([10n ** 38n - 1n, -(10n ** 38n - 1n), 1n, 0n, -1n, 12345n], 128)),
    date: col(new arrow.DateDay(), Int32Array.of(0, 19724, -719528, 0, 2932896, -1)),
    time_ms: col(new arrow.TimeMillisecond(), Int32Array.of(0, 86399999, 3723004, 0, 1, 43200000)),
    time_us: col(new arrow.TimeMicrosecond(), BigInt64Array.of(0n, 86399999999n, 3723004005n, 0n, 1n, 43200000000n)),
    time_ns: col(new arrow.TimeNanosecond(), BigInt64Array.of(0n, 86399999999999n, 3723004005006n, 0n, 1n, 43200000000000n)),
    ts_ms_utc: col(new arrow.TimestampMillisecond('UTC'), BigInt64Array.of(0n, 1704153600123n, -1n, 0n, 253402300799999n, -62135596800000n)),
    ts_us_utc: col(new arrow.TimestampMicrosecond('+00:00'), BigInt64Array.of(0n, 1704153600123456n, -1n, 0n, 253402300799999999n, 1n)),
    ts_ns_utc: col(new arrow.TimestampNanosecond('UTC'), BigInt64Array.of(0n, 1704153600123456789n, -1n, 0n, 9223372036854775807n, -9223372036854775807n)),
    ts_us_local: col(new arrow.TimestampMicrosecond(), BigInt64Array.of(0n, 1704153600123456n, -1n, 0n, 86400000000n, 7n)),
  }
  const fields = Object.entries(cols).map(([name, d]) => new arrow.Field(name, d.type, true))
  const nested = nestedColumns()
  const all = [...Object.values(cols), ...nested.map(n => n.data)]
  const allFields = [...fields, ...nested.map(n => n.field)]
  const struct = arrow.makeData({ type: new arrow.Struct(allFields), length: ROWS, nullCount: 0, children: all })
  return new arrow.Table(new arrow.Schema(allFields), [new arrow.RecordBatch(new arrow.Schema(allFields), struct)])
}

// nestedColumns: list<int32> with empty and null lists and null
// elements, list<list<utf8>>, list<struct<a:int64,b:utf8>>,
// map<utf8,int32>, map<int32,list<int32>>, and struct<x:struct<y:f64>>.
function nestedColumns() {
  const ints = (vals, nulls = []) => {
    const bm = new Uint8Array(Math.ceil(vals.length / 8) || 1)
    vals.forEach((_, i) => { if (!nulls.includes(i)) bm[i >> 3] |= 1 << (i & 7) })
    return arrow.makeData({ type: new arrow.Int32(), length: vals.length, nullCount: nulls.length, nullBitmap: bm, data: Int32Array.from(vals) })
  }
  const listOf = (child, offsets, nullRow, itemNullable = true) => {
    const type = new arrow.List(new arrow.Field('item', child.type, itemNullable))
    return arrow.makeData({ type, length: ROWS, nullCount: nullRow < 0 ? 0 : 1, nullBitmap: nullRow < 0 ? null : valid(nullRow), valueOffsets: Int32Array.from(offsets), child })
  }
  const strs = (items) => {
    const enc = items.map(x => new TextEncoder().encode(x))
    const offsets = new Int32Array(items.length + 1)
    enc.forEach((e, i) => { offsets[i + 1] = offsets[i] + e.length })
    const data = new Uint8Array(offsets[items.length])
    enc.forEach((e, i) => data.set(e, offsets[i]))
    return arrow.makeData({ type: new arrow.Utf8(), length: items.length, nullCount: 0, valueOffsets: offsets, data })
  }
  const out = []
  const li = listOf(ints([1, 2, 0, 3, 4, 5, 6], [2]), [0, 3, 3, 3, 4, 5, 7], 2)
  out.push({ field: new arrow.Field('list_i32', li.type, true), data: li })

  const inner = listOf(strs(['a', 'b', 'c', 'd', '']), [0, 2, 2, 3, 5], -1)
  const innerAll = arrow.makeData({ type: inner.type, length: 4, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 2, 3, 5), child: strs(['a', 'b', 'c', 'd', '']) })
  const ll = arrow.makeData({ type: new arrow.List(new arrow.Field('item', inner.type, true)), length: ROWS, nullCount: 1, nullBitmap: valid(3), valueOffsets: Int32Array.of(0, 2, 3, 3, 3, 4, 4), child: innerAll })
  out.push({ field: new arrow.Field('list_list', ll.type, true), data: ll })

  const sFields = [new arrow.Field('a', new arrow.Int64(), true), new arrow.Field('b', new arrow.Utf8(), true)]
  const sa = arrow.makeData({ type: new arrow.Int64(), length: 4, nullCount: 0, data: BigInt64Array.of(1n, 2n ** 62n, -3n, 4n) })
  const sb = strs(['x', 'y', 'z', 'w'])
  const st = arrow.makeData({ type: new arrow.Struct(sFields), length: 4, nullCount: 0, children: [sa, sb] })
  const ls = arrow.makeData({ type: new arrow.List(new arrow.Field('item', st.type, true)), length: ROWS, nullCount: 1, nullBitmap: valid(4), valueOffsets: Int32Array.of(0, 1, 3, 3, 4, 4, 4), child: st })
  out.push({ field: new arrow.Field('list_struct', ls.type, true), data: ls })

  const mk = strs(['k1', 'k2', 'k"3', 'k1'])
  const mv = ints([10, 0, 30, 40], [1])
  const entriesType = new arrow.Struct([new arrow.Field('key', new arrow.Utf8(), false), new arrow.Field('value', new arrow.Int32(), true)])
  const entries = arrow.makeData({ type: entriesType, length: 4, nullCount: 0, children: [mk, mv] })
  const mapType = new arrow.Map_(new arrow.Field('entries', entriesType, false))
  const m = arrow.makeData({ type: mapType, length: ROWS, nullCount: 1, nullBitmap: valid(1), valueOffsets: Int32Array.of(0, 2, 2, 3, 3, 4, 4), child: entries })
  out.push({ field: new arrow.Field('map_str', m.type, true), data: m })

  const ik = ints([7, -1, 0])
  const iv = listOf(ints([1, 2, 3]), [0, 2, 2, 3], -1)
  const ivAll = arrow.makeData({ type: iv.type, length: 3, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 2, 3), child: ints([1, 2, 3]) })
  const ient = arrow.makeData({ type: new arrow.Struct([new arrow.Field('key', new arrow.Int32(), false), new arrow.Field('value', iv.type, true)]), length: 3, nullCount: 0, children: [ik, ivAll] })
  const im = arrow.makeData({ type: new arrow.Map_(new arrow.Field('entries', ient.type, false)), length: ROWS, nullCount: 0, valueOffsets: Int32Array.of(0, 2, 2, 3, 3, 3, 3), child: ient })
  out.push({ field: new arrow.Field('map_int_list', im.type, true), data: im })

  const y = arrow.makeData({ type: new arrow.Float64(), length: ROWS, nullCount: 1, nullBitmap: valid(2), data: Float64Array.of(1.5, -2, 0, 0, 1e-7, 3) })
  const x = arrow.makeData({ type: new arrow.Struct([new arrow.Field('y', y.type, true)]), length: ROWS, nullCount: 1, nullBitmap: valid(5), children: [y] })
  const s = arrow.makeData({ type: new arrow.Struct([new arrow.Field('x', x.type, true)]), length: ROWS, nullCount: 1, nullBitmap: valid(0), children: [x] })
  out.push({ field: new arrow.Field('struct_struct', s.type, true), data: s })
  return out
}

const [cmd, ...args] = process.argv.slice(2)
if (cmd === 'read') {
  for (const f of args) process.stdout.write(JSON.stringify(readFile(f)) + '\n')
} else if (cmd === 'write') {
  writeFiles(args[0], JSON.parse(args[1]))
} else {
  process.stderr.write('usage: parquet-oracle.mjs read FILE... | write DIR SPEC\n')
  process.exit(2)
}
