-- Hospitals (EHR-ChatQA's eICU database adds this dimension table): every staged hospital, text
-- lower-cased; teachingstatus written back as the source's 't'/'f'.
select
    hospitalid,
    {{ ehrsql_eicu_text('numbedscategory') }} as numbedscategory,
    case when teachingstatus then 't' when not teachingstatus then 'f' end as teachingstatus,
    {{ ehrsql_eicu_text('region') }} as region
from {{ ref('stg_eicu__hospital') }}
