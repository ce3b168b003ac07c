/**
 * Migration 7: `append(...)` callable from SQL, so a trigger (or any SQL the
 * application runs) can append an event in its own transaction:
 *
 *     SELECT * FROM rheo.append('orders', jsonb_build_object('id', NEW.id),
 *                               type => 'order.placed', key => NEW.customer_id);
 *
 * It applies the TypeScript append's rules (src/core/arguments.ts,
 * validation.ts, json-size.ts, partitioner.ts): names, lengths counted in
 * UTF-16 code units as JavaScript counts them, metadata an object with string
 * lineage ids, nesting at most 100 deep, the event size rule against
 * `max_event_bytes` (default 1 MiB, the facade's default), and routing by an
 * explicit partition, else Kafka's murmur2 of the key's UTF-8 bytes, else
 * partition 0. An id given twice returns the stored event with
 * `existed = true`. Sequences come from the partition counter row locked
 * until the caller's transaction ends, as with every append (invariant 3),
 * and the NOTIFY is delivered at commit.
 *
 * Errors are raised with SQLSTATE 22023 (invalid_parameter_value) for bad
 * input and an invalid partition, 42704 (undefined_object) for a missing
 * stream and 54000 (program_limit_exceeded) for an event over the size
 * limit, each message starting with "rheo:" and naming the rheo error code.
 *
 * Numbers are counted as PostgreSQL stores them (numeric text, e.g. `1.0`
 * is 3 bytes), which is the size rule's number for every value JavaScript
 * would write and never less.
 */
/** The functions migration 7 installs, for tests and tools that list a schema's functions. */
export const SQL_FUNCTIONS = ['append', 'js_length', 'json_size', 'murmur2'] as const;

export const migration007 = {
  version: 7,
  name: 'sql_append',
  sql: `
CREATE FUNCTION :schema.murmur2(data bytea) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $rheo$
DECLARE
  m CONSTANT bigint := 1540483477; -- 0x5bd1e995
  mask CONSTANT bigint := 4294967295;
  len integer := length(data);
  len4 integer := len / 4;
  rest integer := len % 4;
  tail integer := (len / 4) * 4;
  h bigint := (2538058380 # len) & 4294967295; -- seed 0x9747b28c
  k bigint;
BEGIN
  FOR i IN 0 .. len4 - 1 LOOP
    k := get_byte(data, i * 4)::bigint
       | (get_byte(data, i * 4 + 1)::bigint << 8)
       | (get_byte(data, i * 4 + 2)::bigint << 16)
       | (get_byte(data, i * 4 + 3)::bigint << 24);
    k := (k * m) & mask;
    k := k # (k >> 24);
    k := (k * m) & mask;
    h := (h * m) & mask;
    h := h # k;
  END LOOP;
  IF rest = 3 THEN h := h # (get_byte(data, tail + 2)::bigint << 16); END IF;
  IF rest >= 2 THEN h := h # (get_byte(data, tail + 1)::bigint << 8); END IF;
  IF rest >= 1 THEN
    h := h # get_byte(data, tail)::bigint;
    h := (h * m) & mask;
  END IF;
  h := h # (h >> 13);
  h := (h * m) & mask;
  h := h # (h >> 15);
  -- Kafka's toPositive(): the low 31 bits.
  RETURN (h & 2147483647)::integer;
END
$rheo$;

-- Length in UTF-16 code units, as JavaScript's String.length counts.
CREATE FUNCTION :schema.js_length(s text) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $rheo$
  SELECT char_length(s) + char_length(regexp_replace(s, '[^\\U00010000-\\U0010FFFF]', '', 'g'))
$rheo$;

-- Bytes of a JSON value by rheo's size rule (src/core/json-size.ts).
CREATE FUNCTION :schema.json_size(v jsonb, depth integer DEFAULT 1) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $rheo$
DECLARE
  total bigint;
  n integer := 0;
  k text;
  x jsonb;
BEGIN
  CASE jsonb_typeof(v)
    WHEN 'object' THEN
      IF depth > 100 THEN
        RAISE EXCEPTION 'rheo: invalid_argument: JSON is nested deeper than 100 levels of arrays and objects' USING ERRCODE = '22023';
      END IF;
      total := 2;
      FOR k, x IN SELECT * FROM jsonb_each(v) LOOP
        total := total + octet_length(to_json(k)::text) + 1 + :schema.json_size(x, depth + 1);
        n := n + 1;
      END LOOP;
      RETURN total + greatest(n - 1, 0);
    WHEN 'array' THEN
      IF depth > 100 THEN
        RAISE EXCEPTION 'rheo: invalid_argument: JSON is nested deeper than 100 levels of arrays and objects' USING ERRCODE = '22023';
      END IF;
      total := 2;
      FOR x IN SELECT * FROM jsonb_array_elements(v) LOOP
        total := total + :schema.json_size(x, depth + 1);
        n := n + 1;
      END LOOP;
      RETURN total + greatest(n - 1, 0);
    WHEN 'boolean' THEN RETURN CASE WHEN v = 'true'::jsonb THEN 4 ELSE 5 END;
    WHEN 'null' THEN RETURN 4;
    ELSE RETURN octet_length(v::text); -- strings (escaped as JSON.stringify escapes) and numbers
  END CASE;
END
$rheo$;

CREATE FUNCTION :schema.append(
  stream text,
  payload jsonb,
  type text DEFAULT 'event',
  key text DEFAULT NULL,
  metadata jsonb DEFAULT '{}'::jsonb,
  id text DEFAULT NULL,
  "partition" integer DEFAULT NULL,
  "timestamp" timestamptz DEFAULT NULL,
  max_event_bytes integer DEFAULT 1048576
) RETURNS TABLE (event_id text, event_partition integer, event_sequence bigint, existed boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $rheo$
DECLARE
  s_id integer;
  s_partitions integer;
  v_id text := id;
  v_partition integer;
  v_sequence bigint;
  v_ts timestamptz := coalesce("timestamp", clock_timestamp());
  v_size bigint;
  v_hex text;
BEGIN
  IF stream IS NULL OR stream !~ '^[A-Za-z0-9._:-]{1,200}$' THEN
    RAISE EXCEPTION 'rheo: invalid_argument: stream name must be 1-200 characters of [A-Za-z0-9._:-], got %', coalesce(quote_literal(stream), 'NULL') USING ERRCODE = '22023';
  END IF;
  IF payload IS NULL THEN
    RAISE EXCEPTION 'rheo: invalid_argument: payload is required (SQL NULL is not JSON; use ''null''::jsonb)' USING ERRCODE = '22023';
  END IF;
  IF type IS NULL OR :schema.js_length(type) NOT BETWEEN 1 AND 200 THEN
    RAISE EXCEPTION 'rheo: invalid_argument: type must be a string of 1-200 characters' USING ERRCODE = '22023';
  END IF;
  IF key IS NOT NULL AND :schema.js_length(key) > 1024 THEN
    RAISE EXCEPTION 'rheo: invalid_argument: key must be a string of 0-1024 characters' USING ERRCODE = '22023';
  END IF;
  IF v_id IS NOT NULL AND :schema.js_length(v_id) NOT BETWEEN 1 AND 200 THEN
    RAISE EXCEPTION 'rheo: invalid_argument: id must be a string of 1-200 characters' USING ERRCODE = '22023';
  END IF;
  IF metadata IS NULL OR jsonb_typeof(metadata) <> 'object' THEN
    RAISE EXCEPTION 'rheo: invalid_argument: metadata must be a JSON object' USING ERRCODE = '22023';
  END IF;
  IF metadata ? 'correlationId' AND (jsonb_typeof(metadata -> 'correlationId') <> 'string'
       OR :schema.js_length(metadata ->> 'correlationId') NOT BETWEEN 1 AND 200)
     OR metadata ? 'causationId' AND (jsonb_typeof(metadata -> 'causationId') <> 'string'
       OR :schema.js_length(metadata ->> 'causationId') NOT BETWEEN 1 AND 200) THEN
    RAISE EXCEPTION 'rheo: invalid_argument: metadata.correlationId and metadata.causationId must be strings of 1-200 characters' USING ERRCODE = '22023';
  END IF;
  IF v_ts < '0001-01-01T00:00:00Z'::timestamptz OR v_ts >= '10000-01-01T00:00:00Z'::timestamptz THEN
    RAISE EXCEPTION 'rheo: invalid_argument: timestamp must lie in the years 0001..9999 (UTC)' USING ERRCODE = '22023';
  END IF;
  v_size := :schema.json_size(payload) + :schema.json_size(metadata);
  IF v_size > max_event_bytes THEN
    RAISE EXCEPTION 'rheo: event_too_large: event for stream "%" is % bytes of payload and metadata, over % bytes', stream, v_size, max_event_bytes
      USING ERRCODE = '54000';
  END IF;

  SELECT s.id, s.partitions INTO s_id, s_partitions FROM :schema.streams s WHERE s.name = stream;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'rheo: stream_not_found: stream "%" does not exist', stream USING ERRCODE = '42704';
  END IF;
  IF "partition" IS NOT NULL THEN
    IF "partition" < 0 OR "partition" >= s_partitions THEN
      RAISE EXCEPTION 'rheo: invalid_partition: partition % is out of range for stream "%" (partitions 0..%)', "partition", stream, s_partitions - 1
        USING ERRCODE = '22023';
    END IF;
    v_partition := "partition";
  ELSIF key IS NOT NULL THEN
    v_partition := :schema.murmur2(convert_to(key, 'UTF8')) % s_partitions;
  ELSE
    v_partition := 0;
  END IF;

  IF v_id IS NULL THEN
    -- A UUIDv7 like the TypeScript ids: 48 bits of epoch milliseconds, then random bits.
    v_hex := lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
          || '7' || substr(replace(gen_random_uuid()::text, '-', ''), 2, 3)
          || to_hex(8 + floor(random() * 4)::integer) || substr(replace(gen_random_uuid()::text, '-', ''), 1, 15);
    v_id := substr(v_hex, 1, 8) || '-' || substr(v_hex, 9, 4) || '-' || substr(v_hex, 13, 4) || '-'
         || substr(v_hex, 17, 4) || '-' || substr(v_hex, 21, 12);
  END IF;

  FOR attempt IN 1 .. 5 LOOP
    RETURN QUERY SELECT e.id, e."partition", e.sequence, true FROM :schema.events e WHERE e.stream_id = s_id AND e.id = v_id;
    IF FOUND THEN RETURN; END IF;
    BEGIN
      -- The counter row stays locked until the caller's transaction ends:
      -- appenders to this partition commit in sequence order (invariant 3).
      UPDATE :schema.stream_partitions p SET high_watermark = p.high_watermark + 1
      WHERE p.stream_id = s_id AND p."partition" = v_partition
      RETURNING p.high_watermark INTO v_sequence;
      INSERT INTO :schema.events (stream_id, "partition", sequence, id, type, key, payload, metadata, ts, size_bytes)
      VALUES (s_id, v_partition, v_sequence, v_id, type, key, payload, metadata, v_ts, v_size);
      PERFORM pg_notify('rheo_' || left(trim(BOTH '"' FROM ':schema'), 55) || '_append', stream);
      RETURN QUERY SELECT v_id, v_partition, v_sequence, false;
      RETURN;
    EXCEPTION WHEN unique_violation THEN
      -- A concurrent transaction committed the same id: the block's bump is
      -- undone with it; the next round finds the stored event.
      NULL;
    END;
  END LOOP;
  RAISE EXCEPTION 'rheo: ambiguous: append of id "%" kept racing a concurrent append of the same id', v_id USING ERRCODE = '40001';
END
$rheo$;
`,
} as const;
