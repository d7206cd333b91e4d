{{ config(alias='codes') }}
-- metadata/codes.parquet: every code of the raw events (the shifted events' are a subset), with a description from
-- the MIMIC-IV dictionaries (ICD long titles, lab and item labels; the MEDS-for-MIMIC-IV ETL prefers OMOP concept
-- names, which are not part of MIMIC-IV) and, for ICD codes, the parent code the ETL gives: ICD9CM/ or ICD10CM/ with
-- the dotted diagnosis code, ICD9Proc/ with the dotted procedure code, ICD10PCS/ (pre_MEDS.py add_icd_*_dot).
with distinct_codes as (

    select distinct code from {{ ref('int_meds__mimic_iv__events') }}

),

codes as (

    select code, string_split(code, '//') as part from distinct_codes

),

keyed as (

    select
        code,
        part,
        case when part[1] = 'LAB' and part[2] in ('SPECIMEN_COLLECTED', 'RESULT') then try_cast(part[3] as integer)
        end as lab_itemid,
        case when part[1] = 'LAB' and part[2] not in ('SPECIMEN_COLLECTED', 'RESULT') then try_cast(part[2] as integer)
             when part[1] in ('INFUSION_START', 'INFUSION_END', 'SUBJECT_FLUID_OUTPUT')
                 then try_cast(part[2] as integer)
             when part[1] = 'PROCEDURE' and part[2] in ('START', 'END') then try_cast(part[3] as integer)
        end as item_itemid,
        case when part[1] in ('DIAGNOSIS', 'PROCEDURE') and part[2] = 'ICD' then try_cast(part[3] as integer)
        end as icd_version,
        case when part[1] in ('DIAGNOSIS', 'PROCEDURE') and part[2] = 'ICD' then part[4] end as icd_code
    from codes

)

select
    k.code,
    case
        when k.code = 'MEDS_BIRTH' then 'Birth'
        when k.code = 'MEDS_DEATH' then 'Death'
        when k.part[1] = 'DIAGNOSIS' then dx.long_title
        when k.part[1] = 'PROCEDURE' and k.part[2] = 'ICD' then px.long_title
        else coalesce(lab.label, item.label)
    end as description,
    case
        when k.part[1] = 'DIAGNOSIS' and k.icd_code is not null then [
            'ICD' || k.icd_version || 'CM/' || {{ meds_dotted('k.icd_code',
                "case when k.icd_version = 9 and k.icd_code like 'E%' then 4 else 3 end") }}]
        when k.part[1] = 'PROCEDURE' and k.icd_version = 9 then ['ICD9Proc/' || {{ meds_dotted('k.icd_code', '2') }}]
        when k.part[1] = 'PROCEDURE' and k.icd_version = 10 then ['ICD10PCS/' || k.icd_code]
    end as parent_codes
from keyed as k
left join {{ ref('stg_mimic_iv__d_icd_diagnoses') }} as dx
    on k.part[1] = 'DIAGNOSIS' and dx.icd_version = k.icd_version and dx.icd_code = k.icd_code
left join {{ ref('stg_mimic_iv__d_icd_procedures') }} as px
    on k.part[1] = 'PROCEDURE' and px.icd_version = k.icd_version and px.icd_code = k.icd_code
left join {{ ref('stg_mimic_iv__d_labitems') }} as lab on lab.itemid = k.lab_itemid
left join {{ ref('stg_mimic_iv__d_items') }} as item on item.itemid = k.item_itemid
order by k.code
