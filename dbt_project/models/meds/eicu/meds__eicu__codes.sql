{{ config(alias='codes') }}
-- metadata/codes.parquet: every code of the eICU events. eICU ships no code dictionaries, and neither does the
-- eICU-MEDS ETL give descriptions; it gives a DIAGNOSIS//<diagnosisstring> code the ICD codes that eICU lists for that
-- string as parents (pre_MEDS.py dx_icd_map: icd9code split on ', ', stripped, blanks dropped; event_configs.yaml:
-- ICD9CM/<code> for a code of the ICD-9 form and not the ICD-10 one, ICD10CM/<code> for the reverse, nothing else).
with diagnosis_icd as (

    select distinct
        'DIAGNOSIS//' || d.diagnosisstring as code,
        trim(unnest(string_split(d.icd9code, ', '))) as icd_code
    from {{ meds_raw_file('eicu', 'diagnosis') }} as d
    where d.diagnosisstring is not null and d.icd9code is not null

),

parents as (

    select
        code,
        list(
            case
                when is_icd9 and not is_icd10 then 'ICD9CM/' || icd_code
                when is_icd10 and not is_icd9 then 'ICD10CM/' || icd_code
            end order by icd_code
        ) filter (where is_icd9 != is_icd10) as parent_codes
    from (
        select
            code,
            icd_code,
            regexp_full_match(icd_code, '(?:\d{3}(?:\.\d{1,2})?|E\d{3}(?:\.\d)?|V\d{2}(?:\.\d{1,2})?)') as is_icd9,
            regexp_full_match(icd_code, '[A-TV-Z]\d[0-9A-Z](?:\.[0-9A-Z]{1,4})?') as is_icd10
        from diagnosis_icd
        where icd_code != ''
    )
    group by code

)

select
    e.code,
    case when e.code = 'MEDS_BIRTH' then 'Birth' when e.code = 'MEDS_DEATH' then 'Death' end as description,
    p.parent_codes
from (select distinct code from {{ ref('int_meds__eicu__events') }}) as e
left join parents as p on p.code = e.code
order by e.code
